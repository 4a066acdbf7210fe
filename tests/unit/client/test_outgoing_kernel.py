"""``_produce_kernels.plain_outgoing`` against its reference, ``Producer._check_message``
then ``Producer._prepare``.

Over generated messages (checked and unchecked topics, retry topics, bodies of each
buffer type around the size and compression bounds, properties with or without a
UNIQ_KEY or a transaction flag): whenever the kernel answers, the reference gives an
equal ``_Outgoing`` and leaves the message's properties the same; whenever it declines,
the message is untouched; and a usual message is always answered by the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.client.config import ProducerConfig
from aiorocketmq.client.errors import InvalidArgumentError
from aiorocketmq.client.producer import Producer, _Outgoing
from aiorocketmq.common.message import Message
from aiorocketmq.common.properties import properties_to_string
from tests.support.kernels import kernel_or_skip

MAX_SIZE, COMPRESS_OVER = 64, 32
CHECKED, UNCHECKED, RETRY = "Checked", "Unchecked", "%RETRY%group"


@dataclass
class _Ids:
    """A UNIQ_KEY source that counts: both sides get the same ids."""

    n: int = 0

    def next_id(self) -> str:
        self.n += 1
        return f"ID{self.n}"


def _producer() -> Producer:
    config = ProducerConfig(max_message_size=MAX_SIZE, compress_msg_body_over_howmuch=COMPRESS_OVER)
    producer = Producer("group", "127.0.0.1:9876", config=config)
    producer._checked_topics.update({CHECKED, RETRY})
    producer._uniq = _Ids()  # type: ignore[assignment]
    return producer


_kinds = st.sampled_from([bytes, bytearray, memoryview])
_sizes = st.sampled_from([0, 1, COMPRESS_OVER - 1, COMPRESS_OVER, MAX_SIZE, MAX_SIZE + 1])
_properties = st.dictionaries(
    st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "TRAN_MSG", "WAIT", "a"]),
    st.sampled_from(["true", "false", "TRUE", "x", "k1 k2"]),
    max_size=4,
)


@st.composite
def messages(draw: st.DrawFn) -> tuple[str, Any, int, dict[str, str], bool]:
    """(topic, body, flag, properties, usual)."""
    topic = draw(st.sampled_from([CHECKED, CHECKED, UNCHECKED, RETRY]))
    size = draw(_sizes)
    body = draw(_kinds)(b"b" * size)
    properties = draw(_properties)
    usual = topic == CHECKED and 0 < size < COMPRESS_OVER and "TRAN_MSG" not in properties
    return topic, body, draw(st.integers(-(2**31), 2**31 - 1)), properties, usual


def _outcome(producer: Producer, msg: Message) -> _Outgoing | str:
    try:
        producer._check_message(msg)
        return producer._prepare(msg)
    except Exception as exc:  # the refusal, compared by type and words
        return f"{type(exc).__name__}: {exc}"


@settings(max_examples=500, deadline=None)
@given(messages())
def test_the_kernel_answers_as_the_reference_or_declines(
    case: tuple[str, Any, int, dict[str, str], bool],
) -> None:
    kernel = kernel_or_skip("aiorocketmq.client._produce_kernels")
    topic, body, flag, properties, usual = case
    reference, mine = _producer(), _producer()
    expected_msg = Message(topic, body, flag, dict(properties))
    expected = _outcome(reference, expected_msg)
    msg = Message(topic, body, flag, dict(properties))
    got = kernel.plain_outgoing(
        _Outgoing, msg, mine._checked_topics, MAX_SIZE, COMPRESS_OVER,
        mine._uniq.next_id, properties_to_string,
    )  # fmt: skip
    if usual:
        assert got is not None
    if got is None:
        assert msg.properties == properties  # untouched: the reference starts afresh
        return
    assert got == expected
    assert got.body is body
    assert msg.properties == expected_msg.properties


def test_the_producer_uses_the_kernel_for_a_usual_message() -> None:
    kernel_or_skip("aiorocketmq.client._produce_kernels")
    producer = _producer()
    msg = Message(CHECKED, b"body", properties={"KEYS": "k"})
    out = producer._outgoing(msg)
    assert out == _Outgoing(CHECKED, b"body", 0, 0, "KEYS\x01k\x02UNIQ_KEY\x01ID1", "ID1")
    assert producer._uniq.n == 1  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgumentError, match="over max value"):
        producer._outgoing(Message(CHECKED, b"x" * (MAX_SIZE + 1)))
