"""Store result statuses -> remoting response codes: one table each, nothing else.

Owns: ``PUT_STATUS_TABLE`` (``PutMessageStatus`` -> code, remark template,
whether the message was stored; ``SendMessageProcessor.handlePutMessageResult``
of RocketMQ 4.9.8) and ``PULL_STATUS_TABLE`` (``GetMessageStatus`` -> pull
response code; ``PullMessageProcessor``, specs/store.md §9.2), with the two
lookups the processors call.

Must not: touch the store, the network or any state; the processors apply the
other pull rules (suspend, slave redirects, OFFSET_MOVED_EVENT).

Java quirks kept: FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT and SLAVE_NOT_AVAILABLE
are stored ("sendOK"): the reply carries msgId and offsets with a non-zero code.
NO_MATCHED_LOGIC_QUEUE / NO_MESSAGE_IN_QUEUE answer PULL_OFFSET_MOVED when the
request offset is not 0, else PULL_NOT_FOUND.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.store.results import GetMessageStatus, PutMessageStatus

__all__ = [
    "PULL_STATUS_TABLE",
    "PUT_STATUS_TABLE",
    "PutStatusRow",
    "disk_util_text",
    "pull_response_code",
    "put_response",
]


@dataclass(frozen=True, slots=True)
class PutStatusRow:
    """One row of the send table.

    Attributes:
        code: The response code.
        stored: The message is in the CommitLog (Java's ``sendOK``): the reply
            header carries msgId, queueId and queueOffset.
        remark: None, or a template with ``{max_message_size}`` / ``{disk_util}``.
    """

    code: ResponseCode
    stored: bool
    remark: str | None = None


_ILLEGAL_REMARK: Final = (
    "the message is illegal, maybe msg body or properties length not matched. "
    "msg body length limit {max_message_size}B, msg properties length limit 32KB."
)
_NOT_AVAILABLE_REMARK: Final = (
    "service not available now. It may be caused by one of the following reasons: "
    "the broker's disk is full [{disk_util}], messages are put to the slave, "
    "message store has been shut down, etc."
)

PUT_STATUS_TABLE: Final[dict[PutMessageStatus, PutStatusRow]] = {
    PutMessageStatus.PUT_OK: PutStatusRow(ResponseCode.SUCCESS, True),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: PutStatusRow(ResponseCode.FLUSH_DISK_TIMEOUT, True),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: PutStatusRow(ResponseCode.FLUSH_SLAVE_TIMEOUT, True),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: PutStatusRow(ResponseCode.SLAVE_NOT_AVAILABLE, True),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: PutStatusRow(
        ResponseCode.SYSTEM_ERROR, False, "create mapped file failed, server is busy or broken."
    ),
    PutMessageStatus.MESSAGE_ILLEGAL: PutStatusRow(
        ResponseCode.MESSAGE_ILLEGAL, False, _ILLEGAL_REMARK
    ),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutStatusRow(
        ResponseCode.MESSAGE_ILLEGAL, False, _ILLEGAL_REMARK
    ),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: PutStatusRow(
        ResponseCode.SERVICE_NOT_AVAILABLE, False, _NOT_AVAILABLE_REMARK
    ),
    PutMessageStatus.OS_PAGECACHE_BUSY: PutStatusRow(
        ResponseCode.SYSTEM_ERROR,
        False,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    PutMessageStatus.UNKNOWN_ERROR: PutStatusRow(ResponseCode.SYSTEM_ERROR, False, "UNKNOWN_ERROR"),
}
"""Every ``PutMessageStatus``; a test asserts the table is exhaustive."""

PULL_STATUS_TABLE: Final[dict[GetMessageStatus, ResponseCode | None]] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: None,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE: None,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
"""Every ``GetMessageStatus``; None = PULL_OFFSET_MOVED if the request offset != 0,
else PULL_NOT_FOUND (an empty or unknown queue asked from 0 is simply empty)."""


def disk_util_text(commit_log_ratio: float, consume_queue_ratio: float, index_ratio: float) -> str:
    """Java's ``SendMessageProcessor.diskUtil()``: ``"CL: %5.2f CQ: %5.2f INDEX: %5.2f"``
    of the disk usage ratios (0..1) of the CommitLog, ConsumeQueue and index dirs."""
    return f"CL: {commit_log_ratio:5.2f} CQ: {consume_queue_ratio:5.2f} INDEX: {index_ratio:5.2f}"


def put_response(
    status: PutMessageStatus, *, max_message_size: int, disk_util: str = ""
) -> tuple[ResponseCode, str | None, bool]:
    """``(code, remark, stored)`` for a put's status.

    Args:
        status: The store's answer.
        max_message_size: ``maxMessageSize``, quoted by the MESSAGE_ILLEGAL remark.
        disk_util: Java's ``diskUtil()`` text (``"CL: 0.42 CQ: 0.42 INDEX: 0.42"``),
            quoted by the SERVICE_NOT_AVAILABLE remark.
    """
    row = PUT_STATUS_TABLE[status]
    remark = None
    if row.remark is not None:
        remark = row.remark.format(max_message_size=max_message_size, disk_util=disk_util)
    return row.code, remark, row.stored


def pull_response_code(status: GetMessageStatus, request_offset: int) -> ResponseCode:
    """The pull response code for ``status`` (before suspend / slave rules)."""
    code = PULL_STATUS_TABLE[status]
    if code is None:
        return (
            ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
        )
    return code
