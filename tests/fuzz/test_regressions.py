"""Findings of the fuzzers, pinned: each input once escaped as an untyped exception.

All were Python's 4,300-digit limit on ``int()`` of a decimal string, which raises
``ValueError`` rather than a parse error: in the extFields readers (``ext_int`` /
``ext_long`` / their optional forms), in ``fastjson.loads`` (a JSON number that long
is not a ``JSONDecodeError``), and in the DELAY / queueId parsers a SEND_MESSAGE or a
lock body reaches (the broker answered SYSTEM_ERROR and logged the failure). The
transaction services' parsers had the same flaw.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.broker.transaction import check_service, half_service
from aiorocketmq.common import fastjson
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import Message
from aiorocketmq.common.protocol_bodies import HeartbeatData, LockBatchRequestBody
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.errors import HeaderFieldError
from aiorocketmq.remoting.headers import ext_int, ext_long, ext_opt_int, ext_opt_long
from aiorocketmq.store.inner_message import parse_delay_level
from tests.support.cluster import in_process_broker
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.fuzz

LONG_DIGITS = ["9" * 4301, "-" + "1" * 5000, "+" + "2" * 4400, "9" * 20]


@pytest.mark.parametrize("reader", [ext_int, ext_long, ext_opt_int, ext_opt_long])
@pytest.mark.parametrize("value", LONG_DIGITS)
def test_ext_readers_reject_long_digit_runs_as_out_of_range(reader: object, value: str) -> None:
    with pytest.raises(HeaderFieldError, match=r"<queueOffset> is out of .* range"):
        reader({"queueOffset": value}, "queueOffset")  # type: ignore[operator]


@pytest.mark.parametrize("reader", [ext_int, ext_long])
def test_leading_zeros_still_parse_as_java_does(reader: object) -> None:
    assert reader({"f": "0" * 4400 + "42"}, "f") == 42  # type: ignore[operator]
    assert reader({"f": "-" + "0" * 30 + "7"}, "f") == -7  # type: ignore[operator]


@pytest.mark.parametrize(
    "text",
    ["1" * 4301, '{"a":' + "9" * 5000 + "}", "{0:" + "1" * 4400 + "}", "[-" + "3" * 4301 + "]"],
)
def test_fastjson_rejects_huge_numbers_as_protocol_errors(text: str) -> None:
    with pytest.raises(RemoteProtocolError, match="not JSON"):
        fastjson.loads(text)


def test_heartbeat_with_a_huge_number_is_a_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        HeartbeatData.decode(b'{"clientID":"c","producerDataSet":[' + b"7" * 4500 + b"]}")


# -- property values: the socket fuzzer's SEND_MESSAGE with DELAY = 4,301 nines -----


def test_delay_property_past_the_digit_limit_is_not_an_int() -> None:
    huge = "9" * 4301
    assert parse_delay_level({"DELAY": huge}) is None
    assert parse_delay_level({"DELAY": "0" * 4400 + "3"}) == 3  # Java's leading zeros
    with pytest.raises(RemoteProtocolError, match="DELAY property is not an integer"):
        _ = Message("T", b"x", properties={"DELAY": huge}).delay_time_level


def test_message_queue_id_past_the_digit_limit_is_a_protocol_error() -> None:
    body = b'{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T","brokerName":"b",'
    body += b'"queueId":"' + b"7" * 4400 + b'"}]}'
    with pytest.raises(RemoteProtocolError, match="queueId is not an integer"):
        LockBatchRequestBody.decode(body)


async def test_broker_answers_a_send_with_a_huge_delay_without_failing(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path) as broker:
        client = RemotingClient()
        try:
            request = send_request(properties="DELAY\x01" + "9" * 4301 + "\x02")
            reply = await client.invoke(broker.address, request, 5000)
        finally:
            await client.close()
    assert reply.code != ResponseCode.SYSTEM_ERROR, reply.remark
    assert "Exceeds the limit" not in (reply.remark or "")


# -- not fixed: the transaction services (outside the decoders) -----------------------


def test_check_service_long_past_the_digit_limit_is_refused() -> None:
    assert check_service._java_long("9" * 4301) == -1
    assert check_service._java_long("-" + "0" * 5000 + "42") == -42


def test_half_service_int_past_the_digit_limit_is_refused() -> None:
    assert half_service._is_java_int("9" * 4301) is False
    assert half_service._is_java_int("0" * 5000 + "7") is True  # leading zeros, as Java
