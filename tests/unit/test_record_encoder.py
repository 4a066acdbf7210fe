"""encode_records: a batch of one queue, byte for byte encode_record per entry."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.common.message_codec import encode_record, encode_records
from tests.unit.test_message_codec import _HOST, _NAME, _TOPIC

_ENTRY = st.tuples(
    st.integers(-(2**31), 2**31 - 1),  # flag
    st.binary(max_size=300),
    st.one_of(st.text(max_size=80), st.lists(_NAME, max_size=4).map("\x02".join)),
)
_SHARED = st.fixed_dictionaries(
    {
        "topic": _TOPIC,
        "queue_id": st.integers(0, 2**31 - 1),
        "sys_flag": st.integers(0, 0xFFFF),
        "born_timestamp": st.integers(0, 2**63 - 1),
        "born_host": _HOST,
        "store_host": _HOST,
        "reconsume_times": st.integers(0, 2**31 - 1),
    }
)


@given(entries=st.lists(_ENTRY, max_size=8), shared=_SHARED)
def test_equals_encode_record_per_entry(
    entries: list[tuple[int, bytes, str]], shared: dict[str, Any]
) -> None:
    """Any flags, bodies, properties text, topics, IPv4/IPv6 hosts and sysFlag bits."""
    expected = b"".join(
        encode_record(flag=flag, body=body, properties=props, store_timestamp=0, **shared)
        for flag, body, props in entries
    )
    assert bytes(encode_records(entries, **shared)) == expected


def test_memoryview_bodies_and_empty_batches() -> None:
    shared: dict[str, Any] = {
        "topic": "T", "queue_id": 1, "born_timestamp": 5,
        "born_host": ("127.0.0.1", 1), "store_host": ("::1", 2),
    }  # fmt: skip
    body = memoryview(b"abcdef")[1:4]
    one = encode_record(body=body, properties="a\x01b", store_timestamp=0, **shared)
    assert encode_records([(0, body, "a\x01b")], **shared) == one
    assert encode_records([], **shared) == bytearray()


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ((0, b"x", "p" * 32768), "properties are 32768 bytes"),
        ((2**31, b"x", ""), "does not fit its width"),
        ((0, b"x", "\udc80\ud800"), "cannot be encoded"),
    ],
)
def test_an_entry_that_cannot_be_encoded_is_refused(
    entry: tuple[int, bytes, str], why: str
) -> None:
    shared: dict[str, Any] = {
        "topic": "T", "queue_id": 1, "born_timestamp": 5,
        "born_host": ("127.0.0.1", 1), "store_host": ("127.0.0.1", 2),
    }  # fmt: skip
    with pytest.raises(LocalProtocolError, match=why):
        encode_records([(0, b"ok", ""), entry], **shared)
