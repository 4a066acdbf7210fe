"""encode_batch_args (the C batch encoder) against the reference it replaces.

The reference is ``decode_batch_entries`` + ``merge_batch_properties`` +
``encode_records``; the kernel must give its bytes, or decline (None) wherever the
reference refuses, so that the caller's reference path words the refusal.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common import record_encoder
from aiorocketmq.common.batch_codec import (
    decode_batch_entries,
    encode_batch,
    merge_batch_properties,
)
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.message import Message
from aiorocketmq.common.record_encoder import (
    batch_kernel_args,
    encode_batch_args,
    encode_records,
)
from tests.support.kernels import kernel_or_skip
from tests.unit.test_message_codec import _HOST, _NAME, _TOPIC

pytestmark = pytest.mark.timeout(120)

_PROPS = st.one_of(
    st.just(""),
    st.lists(st.tuples(_NAME, _NAME), max_size=4).map(
        lambda pairs: "\x02".join(f"{k}\x01{v}" for k, v in pairs)
    ),
    st.text(max_size=40),
)
_ENTRY = st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=300), _PROPS)
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


def encode_batch_records(body: Any, batch_properties: str, **fields: Any) -> bytearray | None:
    """The kernel's records of a batch body, as the broker's batch put asks for them."""
    args = batch_kernel_args(body, batch_properties, **fields)
    return None if args is None else encode_batch_args(args)


@pytest.fixture(scope="module", autouse=True)
def _kernel() -> None:
    kernel_or_skip("aiorocketmq.common._record_kernels")


def _body(entries: list[tuple[int, bytes, str]], trailing: list[bool]) -> bytes:
    """A client batch body; some entries' properties end with \\x02, as stock clients'."""
    parts = []
    for (flag, body, props), end in zip(entries, trailing, strict=False):
        raw = (props + ("\x02" if end and props else "")).encode("utf-8", "surrogateescape")
        parts.append(struct.pack(">iiiii", 22 + len(body) + len(raw), 0, 0, flag, len(body)))
        parts += [body, struct.pack(">h", len(raw)), raw]
    return b"".join(parts)


def _reference(body: bytes, batch_props: str, shared: dict[str, Any]) -> bytearray | None:
    try:
        entries = decode_batch_entries(body)
        if not entries:
            return None
        return encode_records(
            ((e.flag, e.body, merge_batch_properties(e.properties_raw, batch_props))
             for e in entries),
            **shared,
        )  # fmt: skip
    except (RemoteProtocolError, LocalProtocolError):
        return None


@settings(max_examples=300, deadline=None)
@given(
    entries=st.lists(_ENTRY, max_size=6),
    trailing=st.lists(st.booleans(), min_size=6, max_size=6),
    batch_props=_PROPS,
    shared=_SHARED,
)
def test_equals_the_reference_byte_for_byte(
    entries: list[tuple[int, bytes, str]],
    trailing: list[bool],
    batch_props: str,
    shared: dict[str, Any],
) -> None:
    body = _body(entries, trailing)
    got = encode_batch_records(body, batch_props, **shared)
    want = _reference(body, batch_props, shared)
    if want is None:
        assert got is None
    else:
        assert got is not None and bytes(got) == bytes(want)


def test_every_single_byte_change_declines_or_agrees() -> None:
    messages = [Message("T", b"body", keys="k1"), Message("T", b"", tags="t")]
    body = encode_batch(messages)
    shared: dict[str, Any] = {
        "topic": "T", "queue_id": 1, "sys_flag": 0, "born_timestamp": 5,
        "born_host": ("127.0.0.1", 1), "store_host": ("::1", 10911),
    }  # fmt: skip
    for pos in range(len(body)):
        for value in {0, 0xFF, (body[pos] + 1) % 256, (body[pos] - 1) % 256}:
            damaged = body[:pos] + bytes([value]) + body[pos + 1 :]
            got = encode_batch_records(damaged, "WAIT\x01true", **shared)
            want = _reference(damaged, "WAIT\x01true", shared)
            assert (None if got is None else bytes(got)) == (
                None if want is None else bytes(want)
            ), (pos, value)


def test_declines_what_only_the_reference_may_refuse() -> None:
    shared: dict[str, Any] = {
        "topic": "T", "queue_id": 1, "sys_flag": 0, "born_timestamp": 5,
        "born_host": ("127.0.0.1", 1), "store_host": ("127.0.0.1", 2),
    }  # fmt: skip
    one = encode_batch([Message("T", b"x")])
    assert encode_batch_records(one, "", **shared) is not None
    assert encode_batch_records(b"", "", **shared) is None  # empty batch
    assert encode_batch_records(one * 3, "", max_messages=2, **shared) is None
    long_props = "K\x01" + "v" * 32766
    assert encode_batch_records(one, long_props, **shared) is None  # merged too long
    assert encode_batch_records(one, "\ud800", **shared) is None  # not encodable
    assert encode_batch_records(one, "", **{**shared, "queue_id": 2**31}) is None
    assert encode_batch_records(one, "", **{**shared, "born_host": ("127.0.0.1", 70000)}) is None


def test_is_none_without_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(record_encoder, "_KERNEL", None)
    body = encode_batch([Message("T", b"x")])
    shared: dict[str, Any] = {
        "topic": "T", "queue_id": 0, "sys_flag": 0, "born_timestamp": 1,
        "born_host": ("127.0.0.1", 1), "store_host": ("127.0.0.1", 2),
    }  # fmt: skip
    assert encode_batch_records(body, "", **shared) is None
