"""Reply -> result mapping of MQClientAPI (Java's processSendResponse / processPullResponse)."""

from __future__ import annotations

import pytest

from aiorocketmq.client.errors import MQBrokerError
from aiorocketmq.client.mq_client_api import process_pull_response, process_send_response
from aiorocketmq.client.results import (
    PULL_STATUS_BY_CODE,
    SEND_STATUS_BY_CODE,
    PullStatus,
    SendStatus,
)
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.kernels import IMPLEMENTATIONS, use_produce_kernel

ADDR = "127.0.0.1:10911"


@pytest.fixture(autouse=True, params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every reply here is read by the C kernel ("c") and by the reference ("python")."""
    use_produce_kernel(request.param, monkeypatch)
    return str(request.param)


def _reply(code: int, fields: dict[str, str], remark: str | None = None) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2).response_to(
        code, remark, ext_fields=fields, body=b"records"
    )


SEND_FIELDS = {"msgId": "7F00000100002A9F0000000000000000", "queueId": "3", "queueOffset": "42"}


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.SUCCESS, SendStatus.SEND_OK),
        (ResponseCode.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
        (ResponseCode.FLUSH_SLAVE_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT),
        (ResponseCode.SLAVE_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
    ],
)
def test_send_statuses(code: ResponseCode, status: SendStatus) -> None:
    result = process_send_response("broker-a", "T", "UNIQ", _reply(code, SEND_FIELDS), ADDR)
    assert result.status is status
    assert result.msg_id == "UNIQ"
    assert result.offset_msg_id == SEND_FIELDS["msgId"]
    assert result.message_queue == MessageQueue("T", "broker-a", 3)
    assert result.queue_offset == 42
    assert (result.region_id, result.trace_on) == ("DefaultRegion", True)


def test_send_region_and_trace_switch() -> None:
    fields = {**SEND_FIELDS, "MSG_REGION": "eu", "TRACE_ON": "false", "transactionId": "tx"}
    result = process_send_response("b", "T", None, _reply(0, fields), ADDR)
    assert (result.region_id, result.trace_on, result.transaction_id) == ("eu", False, "tx")


@pytest.mark.parametrize(
    ("sent", "shared"),
    [
        (MessageQueue("T", "broker-a", 3), True),
        (MessageQueue("T", "broker-a", 1), False),  # the broker chose another queue
        (MessageQueue("Other", "broker-a", 3), False),  # a queue of another topic given
        (MessageQueue("T", "broker-b", 3), False),
    ],
)
def test_the_result_shares_the_sent_queue_only_when_the_reply_names_it(
    sent: MessageQueue, shared: bool
) -> None:
    result = process_send_response("broker-a", "T", "U", _reply(0, SEND_FIELDS), ADDR, sent=sent)
    assert result.message_queue == MessageQueue("T", "broker-a", 3)
    assert (result.message_queue is sent) is shared


@pytest.mark.parametrize("code", [c for c in ResponseCode if c not in SEND_STATUS_BY_CODE])
def test_other_send_codes_are_broker_errors(code: ResponseCode) -> None:
    with pytest.raises(MQBrokerError) as err:
        process_send_response("b", "T", None, _reply(code, {}, "no"), ADDR)
    assert (err.value.code, err.value.remark, err.value.address) == (int(code), "no", ADDR)


def test_malformed_send_reply_is_a_non_retriable_broker_error() -> None:
    with pytest.raises(MQBrokerError) as err:
        process_send_response("b", "T", None, _reply(0, {"msgId": "x", "queueId": "q"}), ADDR)
    assert err.value.code == ResponseCode.SYSTEM_ERROR and not err.value.retriable


PULL_FIELDS = {
    "suggestWhichBrokerId": "1",
    "nextBeginOffset": "10",
    "minOffset": "2",
    "maxOffset": "20",
}


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (ResponseCode.SUCCESS, PullStatus.FOUND),
        (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
        (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
        (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
    ],
)
def test_pull_statuses(code: ResponseCode, status: PullStatus) -> None:
    result = process_pull_response(_reply(code, PULL_FIELDS), ADDR)
    assert result.status is status
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (10, 2, 20)
    assert result.suggest_which_broker_id == 1
    assert result.message_binary == b"records"
    assert result.msg_found_list == []


@pytest.mark.parametrize("code", [c for c in ResponseCode if c not in PULL_STATUS_BY_CODE])
def test_other_pull_codes_are_broker_errors(code: ResponseCode) -> None:
    with pytest.raises(MQBrokerError) as err:
        process_pull_response(_reply(code, PULL_FIELDS, "bad"), ADDR)
    assert (err.value.code, err.value.remark) == (int(code), "bad")


def test_pull_reply_missing_a_field_is_a_broker_error() -> None:
    fields = {k: v for k, v in PULL_FIELDS.items() if k != "maxOffset"}
    with pytest.raises(MQBrokerError) as err:
        process_pull_response(_reply(0, fields), ADDR)
    assert "maxOffset" in str(err.value)
