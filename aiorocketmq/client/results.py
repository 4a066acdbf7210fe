"""What sends and pulls return: ``SendResult`` / ``SendStatus`` and ``PullResult`` / ``PullStatus``.

Owns: the result value objects of the client's broker requests and the tables that
map broker reply codes to their statuses (Java's ``MQClientAPIImpl``
``processSendResponse`` / ``processPullResponse``).

Must not: do I/O or decode message records (``pull_wrapper`` does).

=========================  =========================  ===============================
reply code                 send status                pull status
=========================  =========================  ===============================
SUCCESS                    SEND_OK                    FOUND
FLUSH_DISK_TIMEOUT         FLUSH_DISK_TIMEOUT         (error)
FLUSH_SLAVE_TIMEOUT        FLUSH_SLAVE_TIMEOUT        (error)
SLAVE_NOT_AVAILABLE        SLAVE_NOT_AVAILABLE        (error)
PULL_NOT_FOUND             (error)                    NO_NEW_MSG
PULL_RETRY_IMMEDIATELY     (error)                    NO_MATCHED_MSG
PULL_OFFSET_MOVED          (error)                    OFFSET_ILLEGAL
anything else              MQBrokerError              MQBrokerError
=========================  =========================  ===============================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Final

from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.remoting.codes import ResponseCode

__all__ = [
    "PULL_STATUS_BY_CODE",
    "SEND_STATUS_BY_CODE",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
]


class SendStatus(enum.Enum):
    """How far a sent message got (Java's ``SendStatus``); only SEND_OK is fully stored."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


SEND_STATUS_BY_CODE: Final[dict[int, SendStatus]] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
"""Reply codes that mean "stored" (with a caveat for all but SUCCESS)."""


@dataclass(slots=True)
class SendResult:
    """The outcome of one send (or one batch send).

    Attributes:
        status: how far the message got.
        msg_id: the client-made UNIQ_KEY (comma-joined for a batch).
        offset_msg_id: the broker's offset msgId (store host + physical offset;
            comma-joined for a batch).
        message_queue: the queue the message went to.
        queue_offset: its ConsumeQueue index (the first one for a batch).
        transaction_id: for transactional sends.
        region_id: the broker's MSG_REGION (``DefaultRegion`` when absent, as Java).
        trace_on: false only when the broker said ``TRACE_ON=false``.
    """

    status: SendStatus
    msg_id: str | None
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True


class PullStatus(enum.Enum):
    """What a pull found (Java's ``PullStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


PULL_STATUS_BY_CODE: Final[dict[int, PullStatus]] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}
"""Pull reply codes that are answers rather than errors."""


@dataclass(slots=True)
class PullResult:
    """The outcome of one pull (Java's ``PullResultExt``).

    Attributes:
        status: what the broker found.
        next_begin_offset: the queue offset to pull from next.
        min_offset: the queue's smallest offset.
        max_offset: the queue's next offset to be written.
        suggest_which_broker_id: where the broker suggests the next pull goes
            (0 = master).
        msg_found_list: decoded, tag-filtered messages (filled by ``PullAPIWrapper``).
        message_binary: the raw reply body (records), None once processed.
    """

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = 0
    msg_found_list: list[MessageExt] = field(default_factory=list)
    message_binary: bytes | bytearray | None = None
