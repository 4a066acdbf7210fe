"""encode_record with the C single-record encoder against the reference it stands in for.

The kernel must give the reference's bytes for every record the reference encodes,
and decline (the reference then runs) for everything it refuses, so that
``encode_record`` answers the same with or without it: the same record, or the same
``LocalProtocolError`` with the same words. Valid fields, fields past their widths or
below zero, IPv4 and IPv6 hosts, given and computed body CRCs, memoryview bodies.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common import record_encoder
from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.common.record_encoder import encode_record
from tests.support.kernels import kernel_or_skip
from tests.unit.test_message_codec import _HOST, RECORD_KWARGS

pytestmark = pytest.mark.timeout(120)

_INT32 = st.integers(-(2**31), 2**31 - 1)
_ANY_INT = st.one_of(
    st.integers(-5, 5), _INT32, st.integers(-(2**63), 2**63 - 1), st.integers(2**63, 2**65)
)
_ODD = st.fixed_dictionaries(
    {},
    optional={
        "queue_id": _ANY_INT,
        "flag": _ANY_INT,
        "queue_offset": _ANY_INT,
        "physical_offset": _ANY_INT,
        "sys_flag": _ANY_INT,
        "born_timestamp": _ANY_INT,
        "store_timestamp": _ANY_INT,
        "reconsume_times": _ANY_INT,
        "prepared_transaction_offset": _ANY_INT,
        "body_crc": st.none() | _ANY_INT,
        "born_host": st.one_of(_HOST, st.tuples(st.just("127.0.0.1"), st.integers(-3, 70_000))),
        "store_host": st.one_of(_HOST, st.tuples(st.just("::1"), st.integers(-3, 70_000))),
    },
)


@pytest.fixture(scope="module")
def kernel() -> Any:
    return kernel_or_skip("aiorocketmq.common._record_kernels")


def _encode(kwargs: dict[str, Any], kernel: Any) -> object:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_encoder, "_KERNEL", kernel)
        try:
            return bytes(encode_record(**kwargs))
        except LocalProtocolError as exc:
            return f"refused: {exc}"


@settings(max_examples=400, deadline=None)
@given(kwargs=RECORD_KWARGS, odd=_ODD, view=st.booleans())
def test_encode_record_answers_the_same_with_the_kernel(
    kernel: Any, kwargs: dict[str, Any], odd: dict[str, Any], view: bool
) -> None:
    kwargs = {**kwargs, **odd}
    if view:
        kwargs["body"] = memoryview(kwargs["body"])
    assert _encode(kwargs, kernel) == _encode(kwargs, None)


@settings(max_examples=200, deadline=None)
@given(kwargs=RECORD_KWARGS)
def test_the_kernel_takes_every_valid_record(kernel: Any, kwargs: dict[str, Any]) -> None:
    """Valid fields never fall back: the kernel itself gives the reference's bytes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_encoder, "_KERNEL", None)
        want = bytes(encode_record(**kwargs))
    topic_raw = kwargs["topic"].encode("utf-8", "surrogateescape")
    props_raw = kwargs["properties"].encode("utf-8", "surrogateescape")
    born_raw, born_port, store_raw, store_port, sys_flag = record_encoder._pack_hosts(
        kwargs["born_host"], kwargs["store_host"], kwargs["sys_flag"]
    )
    got = kernel.encode_one_record(
        kwargs["body"], topic_raw, props_raw, kwargs["queue_id"], kwargs["flag"],
        kwargs["queue_offset"], kwargs["physical_offset"], sys_flag, kwargs["born_timestamp"],
        born_raw, born_port, kwargs["store_timestamp"], store_raw, store_port,
        kwargs["reconsume_times"], kwargs["prepared_transaction_offset"], -1,
    )  # fmt: skip
    assert got is not None and bytes(got) == want


def test_the_kernel_declines_what_the_reference_refuses(kernel: Any) -> None:
    ok = {
        "body": b"body", "topic_raw": b"T", "props_raw": b"a\x01b", "queue_id": 1, "flag": 0,
        "queue_offset": 0, "physical_offset": 0, "sys_flag": 0, "born_timestamp": 1,
        "born_raw": bytes(4), "born_port": 1, "store_timestamp": 0, "store_raw": bytes(4),
        "store_port": 2, "reconsume_times": 0, "prepared_transaction_offset": 0, "body_crc": -1,
    }  # fmt: skip
    assert kernel.encode_one_record(*ok.values()) is not None
    for change in (
        {"queue_id": -1}, {"queue_offset": -1}, {"sys_flag": -1}, {"born_port": 65536},
        {"store_port": -1}, {"body_crc": -2}, {"body_crc": 2**31}, {"born_raw": bytes(16)},
        {"sys_flag": 0x20}, {"topic_raw": b"t" * 128}, {"props_raw": b"p" * 32768},
    ):  # fmt: skip
        assert kernel.encode_one_record(*{**ok, **change}.values()) is None, change


@settings(max_examples=200, deadline=None)
@given(kwargs=RECORD_KWARGS, at=st.integers(0, 64), room=st.integers(-2, 2))
def test_encoding_into_a_buffer_writes_the_same_bytes_or_nothing(
    kernel: Any, kwargs: dict[str, Any], at: int, room: int
) -> None:
    """``encode_one_record_into``: ``encode_one_record``'s bytes at ``pos``; -1 and the
    buffer untouched when they do not fit from there."""
    topic_raw = kwargs["topic"].encode("utf-8", "surrogateescape")
    props_raw = kwargs["properties"].encode("utf-8", "surrogateescape")
    born_raw, born_port, store_raw, store_port, sys_flag = record_encoder._pack_hosts(
        kwargs["born_host"], kwargs["store_host"], kwargs["sys_flag"]
    )
    fields = (
        kwargs["body"], topic_raw, props_raw, kwargs["queue_id"], kwargs["flag"],
        kwargs["queue_offset"], kwargs["physical_offset"], sys_flag, kwargs["born_timestamp"],
        born_raw, born_port, kwargs["store_timestamp"], store_raw, store_port,
        kwargs["reconsume_times"],
    )  # fmt: skip
    want = kernel.encode_one_record(*fields, 0, -1)
    assert want is not None
    target = bytearray(b"\xee" * (at + len(want) + room))
    wrote = kernel.encode_one_record_into(target, at, *fields)
    if room < 0:
        assert wrote == -1 and target == bytearray(b"\xee" * len(target))
    else:
        assert wrote == len(want) and target[at : at + wrote] == want
        assert target[:at] + target[at + wrote :] == bytearray(b"\xee" * (len(target) - wrote))


def test_encoding_into_declines_what_the_reference_refuses(kernel: Any) -> None:
    ok = (b"body", b"T", b"a\x01b", 1, 0, 0, 0, 0, 1, bytes(4), 1, 0, bytes(4), 2, 0)
    target = bytearray(256)
    assert kernel.encode_one_record_into(target, 0, *ok) > 0
    for index, bad in ((3, -1), (9, bytes(16)), (10, 65536), (1, b"t" * 128)):
        fields = list(ok)
        fields[index] = bad
        before = bytes(target)
        assert kernel.encode_one_record_into(target, 8, *fields) == -1, (index, bad)
        assert bytes(target) == before
    assert kernel.encode_one_record_into(target, -1, *ok) == -1
