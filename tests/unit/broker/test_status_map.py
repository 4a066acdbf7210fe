"""The two status tables: exhaustive, and each row pinned to RocketMQ 4.9.8."""

from __future__ import annotations

import pytest

from aiorocketmq.broker.status_map import (
    PULL_STATUS_TABLE,
    PUT_STATUS_TABLE,
    pull_response_code,
    put_response,
)
from aiorocketmq.remoting.codes import ResponseCode as RC
from aiorocketmq.store.results import GetMessageStatus as G
from aiorocketmq.store.results import PutMessageStatus as P


def test_every_put_status_is_mapped() -> None:
    assert set(PUT_STATUS_TABLE) == set(P)


def test_every_get_status_is_mapped() -> None:
    assert set(PULL_STATUS_TABLE) == set(G)


@pytest.mark.parametrize(
    ("status", "code", "stored", "remark"),
    [
        (P.PUT_OK, RC.SUCCESS, True, None),
        (P.FLUSH_DISK_TIMEOUT, RC.FLUSH_DISK_TIMEOUT, True, None),
        (P.FLUSH_SLAVE_TIMEOUT, RC.FLUSH_SLAVE_TIMEOUT, True, None),
        (P.SLAVE_NOT_AVAILABLE, RC.SLAVE_NOT_AVAILABLE, True, None),
        (
            P.CREATE_MAPEDFILE_FAILED,
            RC.SYSTEM_ERROR,
            False,
            "create mapped file failed, server is busy or broken.",
        ),
        (
            P.OS_PAGECACHE_BUSY,
            RC.SYSTEM_ERROR,
            False,
            "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
        ),
        (P.UNKNOWN_ERROR, RC.SYSTEM_ERROR, False, "UNKNOWN_ERROR"),
    ],
)
def test_put_rows(status: P, code: RC, stored: bool, remark: str | None) -> None:
    assert put_response(status, max_message_size=4194304) == (code, remark, stored)


@pytest.mark.parametrize("status", [P.MESSAGE_ILLEGAL, P.PROPERTIES_SIZE_EXCEEDED])
def test_illegal_rows_quote_the_size_limit(status: P) -> None:
    code, remark, stored = put_response(status, max_message_size=4194304)
    assert (code, stored) == (RC.MESSAGE_ILLEGAL, False)
    assert remark == (
        "the message is illegal, maybe msg body or properties length not matched. "
        "msg body length limit 4194304B, msg properties length limit 32KB."
    )


def test_service_not_available_quotes_disk_util() -> None:
    code, remark, stored = put_response(
        P.SERVICE_NOT_AVAILABLE, max_message_size=1, disk_util="CL: 0.91 CQ: 0.10 INDEX: 0.10"
    )
    assert (code, stored) == (RC.SERVICE_NOT_AVAILABLE, False)
    assert remark is not None
    assert remark.startswith("service not available now.")
    assert "the broker's disk is full [CL: 0.91 CQ: 0.10 INDEX: 0.10]" in remark


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (G.FOUND, RC.SUCCESS),
        (G.MESSAGE_WAS_REMOVING, RC.PULL_RETRY_IMMEDIATELY),
        (G.NO_MATCHED_MESSAGE, RC.PULL_RETRY_IMMEDIATELY),
        (G.OFFSET_FOUND_NULL, RC.PULL_NOT_FOUND),
        (G.OFFSET_OVERFLOW_BADLY, RC.PULL_OFFSET_MOVED),
        (G.OFFSET_OVERFLOW_ONE, RC.PULL_NOT_FOUND),
        (G.OFFSET_TOO_SMALL, RC.PULL_OFFSET_MOVED),
    ],
)
def test_pull_rows(status: G, code: RC) -> None:
    assert pull_response_code(status, 0) == code
    assert pull_response_code(status, 5) == code


@pytest.mark.parametrize("status", [G.NO_MATCHED_LOGIC_QUEUE, G.NO_MESSAGE_IN_QUEUE])
def test_empty_queue_rows_depend_on_the_request_offset(status: G) -> None:
    assert pull_response_code(status, 0) == RC.PULL_NOT_FOUND
    assert pull_response_code(status, 1) == RC.PULL_OFFSET_MOVED


def test_disk_util_text_is_javas_format() -> None:
    from aiorocketmq.broker.status_map import disk_util_text

    assert disk_util_text(0.913, 0.1, 0.05) == "CL:  0.91 CQ:  0.10 INDEX:  0.05"
