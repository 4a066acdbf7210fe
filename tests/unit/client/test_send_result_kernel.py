"""``_produce_kernels.send_result`` against its reference, ``py_send_result``.

The kernel reads the usual SEND_MESSAGE* reply and declines everything else. Over
generated replies (usual ones, and ones with a field missing, of another type, with a
sign, a space, a non-ASCII digit, a number too long, an unusual TRACE_ON, another
queue), whenever the kernel answers, the reference gives the same result, sharing the
sent queue the same way; whenever the reference refuses, the kernel declined; and a
usual reply is always answered by the kernel.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.client.errors import MQBrokerError
from aiorocketmq.client.mq_client_api import py_send_result
from aiorocketmq.client.results import SendResult, SendStatus
from aiorocketmq.common.message import MessageQueue
from tests.support.kernels import kernel_or_skip

ADDR = "127.0.0.1:10911"
TOPIC, BROKER = "T", "broker-a"

_digits = st.integers(0, 10**18 - 1).map(str)
_odd_numbers = st.sampled_from(  # the last: a fullwidth 3
    ["", "-1", "+1", " 1", "1 ", "1e3", "٣", "²", "0x1", "1" * 19, "1" * 10, "\uff13"]
)
_text = st.text(max_size=12)


@st.composite
def replies(draw: st.DrawFn) -> tuple[dict[str, Any], MessageQueue | None, bool]:
    """(fields, sent queue, usual): ``usual`` when the kernel must answer."""
    usual = draw(st.booleans())
    queue_id = draw(st.integers(0, 99))
    fields: dict[str, Any] = {
        "msgId": draw(_text),
        "queueId": str(queue_id),
        "queueOffset": draw(_digits),
    }
    for name, values in (
        ("TRACE_ON", st.sampled_from(["true", "false", "1", "0"])),
        ("transactionId", _text),
        ("MSG_REGION", _text),
    ):
        if draw(st.booleans()):
            fields[name] = draw(values)
    sent: MessageQueue | None = MessageQueue(TOPIC, BROKER, queue_id)
    if not usual:
        odd = draw(st.sampled_from(["drop", "type", "number", "trace", "queue", "none"]))
        name = draw(st.sampled_from(["msgId", "queueId", "queueOffset"]))
        if odd == "drop":
            fields.pop(name)
        elif odd == "type":
            fields[draw(st.sampled_from([name, "transactionId", "MSG_REGION"]))] = draw(
                st.sampled_from([1, None, b"1", 1.0])
            )
        elif odd == "number":
            fields[draw(st.sampled_from(["queueId", "queueOffset"]))] = draw(_odd_numbers)
        elif odd == "trace":
            fields["TRACE_ON"] = draw(st.sampled_from(["TRUE", "yes", "", " true", "2"]))
        elif odd == "queue":
            sent = draw(st.sampled_from([
                MessageQueue(TOPIC, BROKER, queue_id + 1), MessageQueue("U", BROKER, queue_id),
                MessageQueue(TOPIC, "broker-b", queue_id),
            ]))  # fmt: skip
        else:
            sent = None
    return fields, sent, usual


def _reference(fields: dict[str, Any], sent: MessageQueue | None) -> SendResult | MQBrokerError:
    try:
        return py_send_result(SendStatus.SEND_OK, "UNIQ", dict(fields), sent, TOPIC, BROKER, ADDR)
    except MQBrokerError as exc:
        return exc


@settings(max_examples=600, deadline=None)
@given(replies())
def test_the_kernel_answers_as_the_reference_or_declines(
    case: tuple[dict[str, Any], MessageQueue | None, bool],
) -> None:
    kernel = kernel_or_skip("aiorocketmq.client._produce_kernels")
    fields, sent, usual = case
    expected = _reference(fields, sent)
    got = kernel.send_result(SendResult, SendStatus.SEND_OK, "UNIQ", fields, sent, TOPIC, BROKER)
    if usual:
        assert got is not None, fields
    if got is None:
        return
    assert isinstance(expected, SendResult), (fields, expected)
    assert got == expected
    assert type(got.queue_offset) is int
    assert got.message_queue is sent  # the kernel answers only when the queue is shared
    assert (expected.message_queue is sent) is True


def test_every_slot_of_the_result_is_set() -> None:
    kernel = kernel_or_skip("aiorocketmq.client._produce_kernels")
    sent = MessageQueue(TOPIC, BROKER, 2)
    fields = {"msgId": "M", "queueId": "2", "queueOffset": "7", "MSG_REGION": ""}
    status = SendStatus.FLUSH_DISK_TIMEOUT
    got = kernel.send_result(SendResult, status, None, fields, sent, TOPIC, BROKER)
    assert got == SendResult(status, None, "M", sent, 7, None, "DefaultRegion", True)
    assert repr(got).startswith("SendResult(status=")


def test_fields_that_are_not_a_dict_go_to_the_reference() -> None:
    kernel = kernel_or_skip("aiorocketmq.client._produce_kernels")
    sent = MessageQueue(TOPIC, BROKER, 2)

    class Fields(dict[str, str]):
        pass

    fields = Fields(msgId="M", queueId="2", queueOffset="7")
    assert (
        kernel.send_result(SendResult, SendStatus.SEND_OK, None, fields, sent, TOPIC, BROKER)
        is None
    )
    assert (
        kernel.send_result(SendResult, SendStatus.SEND_OK, None, None, sent, TOPIC, BROKER) is None
    )


def test_a_class_without_those_slots_is_refused() -> None:
    kernel = kernel_or_skip("aiorocketmq.client._produce_kernels")

    class NotAResult:
        pass

    sent = MessageQueue(TOPIC, BROKER, 2)
    fields = {"msgId": "M", "queueId": "2", "queueOffset": "7"}
    with pytest.raises(ValueError, match="not a slot"):
        kernel.send_result(NotAResult, SendStatus.SEND_OK, None, fields, sent, TOPIC, BROKER)
