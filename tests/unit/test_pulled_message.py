"""PulledMessage: the client's lazy decode equals the reference decode field by field."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import struct
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common import pulled_message as pulled_module
from aiorocketmq.common.compression import decompress_body
from aiorocketmq.common.constants import MESSAGE_MAGIC_CODE_V2, MessageSysFlag
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.message_codec import decode_pull_body, encode_record
from aiorocketmq.common.properties import MessageConst, properties_to_string
from aiorocketmq.common.pulled_message import PulledMessage, pulled_messages
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip, use_pulled_kernel
from tests.support.vectors import load_jsonl
from tests.unit.test_message_codec import RECORD_KWARGS


@pytest.fixture(autouse=True, params=IMPLEMENTATIONS)
def _pulled_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs on the C decode and on the pure-Python reference."""
    use_pulled_kernel(request.param, monkeypatch)


STORED = load_jsonl("stored_messages.jsonl")


def record(topic: str, body: bytes, properties: str, sys_flag: int = 0) -> bytearray:
    return encode_record(
        topic=topic, body=body, properties=properties, sys_flag=sys_flag, queue_id=0,
        born_timestamp=1, born_host=("127.0.0.1", 1), store_timestamp=2,
        store_host=("127.0.0.1", 10911),
    )  # fmt: skip


def as_v2(v1: bytes) -> bytes:
    """The same record as RocketMQ 5.1+ writes it: magic v2, a 2-byte topic length."""
    view = decode_pull_body(v1)[0]
    topic_pos = view.body_offset + view.body_len
    v2 = bytearray(v1[:topic_pos]) + struct.pack(">h", v1[topic_pos]) + v1[topic_pos + 1 :]
    struct.pack_into(">ii", v2, 0, len(v1) + 1, MESSAGE_MAGIC_CODE_V2)
    return bytes(v2)


def reference(body: bytes, min_offset: int | None, max_offset: int | None) -> list[MessageExt]:
    """The scalar path: a full MessageExt per record, offsets put one by one."""
    out = []
    for view in decode_pull_body(body):
        msg = view.to_message_ext(copy_body=True)
        msg.body = decompress_body(msg.body, msg.sys_flag)
        if min_offset is not None:
            msg.put_property(MessageConst.PROPERTY_MIN_OFFSET, str(min_offset))
        if max_offset is not None:
            msg.put_property(MessageConst.PROPERTY_MAX_OFFSET, str(max_offset))
        out.append(msg)
    return out


def as_fields(msg: MessageExt) -> dict[str, Any]:
    return {f.name: getattr(msg, f.name) for f in dataclasses.fields(MessageExt)}


@settings(max_examples=150)
@given(
    records=st.lists(RECORD_KWARGS, max_size=6),
    min_offset=st.none() | st.integers(0, 2**40),
    max_offset=st.none() | st.integers(0, 2**40),
)
def test_equals_the_reference_decode_field_by_field(
    records: list[dict[str, Any]], min_offset: int | None, max_offset: int | None
) -> None:
    """Any records (v1/v2, IPv6 hosts, any properties text), compressed bits cleared."""
    encoded = [encode_record(**{**r, "sys_flag": r["sys_flag"] & ~1}) for r in records]
    body = b"".join(as_v2(e) if i % 2 else bytes(e) for i, e in enumerate(encoded))
    got = pulled_messages(body, min_offset=min_offset, max_offset=max_offset)
    want = reference(body, min_offset, max_offset)
    assert [as_fields(m) for m in got] == [as_fields(m) for m in want]
    assert got == want and want == got, "== both ways against plain MessageExt"


@pytest.mark.parametrize("vec", STORED, ids=[v["name"] for v in STORED])
def test_stored_vectors_compressed_bodies_inflate(vec: dict[str, Any]) -> None:
    raw = bytes.fromhex(vec["record_hex"])
    (msg,) = pulled_messages(raw)
    assert as_fields(msg) == as_fields(reference(raw, None, None)[0])


def test_compressed_body_is_inflated_and_a_bad_one_refused() -> None:
    packed = zlib.compress(b"hello" * 100)
    (msg,) = pulled_messages(record("T", packed, "", MessageSysFlag.COMPRESSED_FLAG))
    assert msg.body == b"hello" * 100
    with pytest.raises(RemoteProtocolError):
        pulled_messages(record("T", b"not zlib", "", MessageSysFlag.COMPRESSED_FLAG))


def test_lazy_fields_are_made_once_and_mutations_stick() -> None:
    props = {MessageConst.PROPERTY_KEYS: "k1 k2", MessageConst.PROPERTY_TAGS: "A"}
    raw = record("T", b"x", properties_to_string(props))
    (msg,) = pulled_messages(raw, min_offset=3, max_offset=9)
    assert isinstance(msg, PulledMessage) and isinstance(msg, MessageExt)
    assert msg.properties is msg.properties, "parsed once"
    assert msg.keys == ["k1", "k2"] and msg.tags == "A"
    assert msg.get_property(MessageConst.PROPERTY_MAX_OFFSET) == "9"
    msg.put_property("USER", "v")
    msg.tags = "B"
    assert msg.properties["USER"] == "v" and msg.tags == "B"
    msg.msg_id = "X"
    msg.store_host = ("10.0.0.1", 1)
    assert (msg.msg_id, msg.store_host) == ("X", ("10.0.0.1", 1))
    replaced = dataclasses.replace(msg, topic="U")
    assert replaced.topic == "U" and replaced.properties["USER"] == "v"
    for clone in (copy.copy(msg), pickle.loads(pickle.dumps(msg))):
        assert as_fields(clone) == as_fields(msg)


_NAMES = ("KEYS", "TAGS", "MYKEYS", "X", MessageConst.PROPERTY_MAX_OFFSET)
_PIECES = st.sampled_from(["k1", "k2 k3", " ", "a\x01b", "", "KEYS", "\x01"])


@settings(max_examples=300)
@given(
    segments=st.lists(
        st.tuples(st.sampled_from([*_NAMES, ""]), st.booleans(), st.lists(_PIECES, max_size=3)),
        max_size=6,
    ),
    trailing=st.booleans(),
    max_offset=st.none() | st.integers(0, 99),
)
def test_a_property_read_before_parsing_equals_the_parsed_dicts(
    segments: list[tuple[str, bool, list[str]]], trailing: bool, max_offset: int | None
) -> None:
    """Keys, tags and any property read from the raw text answer what the parsed
    properties answer: duplicates (last wins), empty values, a \x01 inside a value,
    a name that ends with another's, no separator, a trailing \x02."""
    raw = "\x02".join(
        name + ("\x01" if sep else "") + "".join(value) for name, sep, value in segments
    ) + ("\x02" if trailing and segments else "")
    body = record("T", b"x", raw)
    for name in _NAMES:
        (fresh,) = pulled_messages(body, max_offset=max_offset)
        (parsed,) = pulled_messages(body, max_offset=max_offset)
        assert fresh.get_property(name) == parsed.properties.get(name), (name, raw)
    (fresh,) = pulled_messages(body, max_offset=max_offset)
    (parsed,) = pulled_messages(body, max_offset=max_offset)
    assert isinstance(parsed.properties, dict)  # parsed first: the dict path
    want = reference(body, None, max_offset)[0]
    assert (fresh.keys, fresh.tags) == (parsed.keys, parsed.tags) == (want.keys, want.tags)


def test_a_consume_start_put_before_parsing_waits_for_the_parse() -> None:
    """The push consumer stamps every message it hands over: that put leaves the
    properties unparsed, and every reader sees the stamp as a put after the parse."""
    start = MessageConst.PROPERTY_CONSUME_START_TIMESTAMP
    props = {MessageConst.PROPERTY_KEYS: "k1", start: "1", "USER": "u"}
    raw = record("T", b"x", properties_to_string(props))
    (msg,) = pulled_messages(raw, max_offset=9)
    (want,) = reference(raw, None, 9)
    for m in (msg, want):
        m.put_property(start, "5")
        m.put_property(start, "6")
    assert pulled_module._PROPERTIES.__get__(msg) is None  # not parsed by the puts
    assert msg.keys == ["k1"] and msg.get_property(start) == "6"
    assert msg.properties == want.properties and msg.properties[start] == "6"
    msg.put_property(start, "7")  # parsed now: into the dict
    assert msg.get_property(start) == "7" and msg == dataclasses.replace(
        want, properties={**want.properties, start: "7"}
    )


def test_prepared_is_read_without_parsing_other_messages() -> None:
    prepared = {MessageConst.PROPERTY_TRANSACTION_PREPARED: "TRUE", "UNIQ_KEY": "U1"}
    plain = {"UNIQ_KEY": "U2"}
    body = b"".join(record("T", b"x", properties_to_string(p)) for p in (prepared, plain))
    first, second = pulled_messages(body)
    assert first.is_prepared and not second.is_prepared


def _outcome(body: bytes) -> object:
    try:
        return [as_fields(m) for m in pulled_messages(body, min_offset=1, max_offset=2)]
    except RemoteProtocolError as exc:
        return ("error", str(exc))


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(RECORD_KWARGS, min_size=1, max_size=3),
    cut=st.integers(0, 2000),
    flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3),
)
def test_a_damaged_body_gets_the_references_answer(
    records: list[dict[str, Any]], cut: int, flips: list[tuple[int, int]]
) -> None:
    """Cut or flipped bytes (sizes, magic, lengths, a compressed bit): the C decode
    declines and the reference answers, so both give the same messages or error."""
    body = bytearray(b"".join(encode_record(**r) for r in records))
    for pos, value in flips:
        body[pos % len(body)] = value
    body = body[: len(body) - cut % len(body)] if cut % 3 == 0 else body
    kernel_side = _outcome(bytes(body))
    saved, pulled_module._KERNEL = pulled_module._KERNEL, None
    try:
        assert kernel_side == _outcome(bytes(body))
    finally:
        pulled_module._KERNEL = saved


def test_every_single_byte_change_gets_the_references_answer() -> None:
    """Each byte of a v1 and a v2 record (IPv6 store host) set to 0, 0xFF, +1 and -1."""
    v1 = record("T", b"body", "KEYS\x01k\x02UNIQ_KEY\x01u")
    v6 = encode_record(
        topic="Tv6", body=b"b2", properties="TAGS\x01t", queue_id=1, born_timestamp=1,
        born_host=("127.0.0.1", 1), store_timestamp=2, store_host=("::1", 10911),
    )  # fmt: skip
    body = bytes(v1 + as_v2(v6))
    saved = pulled_module._KERNEL
    for pos in range(len(body)):
        for value in {0, 0xFF, (body[pos] + 1) % 256, (body[pos] - 1) % 256}:
            damaged = body[:pos] + bytes([value]) + body[pos + 1 :]
            kernel_side = _outcome(damaged)
            pulled_module._KERNEL = None
            try:
                assert kernel_side == _outcome(damaged), (pos, value)
            finally:
                pulled_module._KERNEL = saved


def test_the_kernel_refuses_a_class_whose_fields_are_not_slots() -> None:
    """It writes fields by slot offset: a class without those slots is an error, not a
    write into memory that belongs to something else."""
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")

    class Plain:
        pass

    body = bytes(record("T", b"x", ""))
    with pytest.raises(ValueError, match="is not a slot"):
        kernel.pulled_messages(body, Plain, (), (), decompress_body)
    with pytest.raises(ValueError, match="is not a slot"):
        kernel.pulled_messages(body, PulledMessage, (), (PulledMessage.keys,), decompress_body)
