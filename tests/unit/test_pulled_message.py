"""PulledMessage: the client's lazy decode equals the reference decode field by field."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common.compression import decompress_body
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.message_codec import decode_pull_body, encode_record
from aiorocketmq.common.properties import MessageConst, properties_to_string
from aiorocketmq.common.pulled_message import PulledMessage, pulled_messages
from tests.support.vectors import load_jsonl
from tests.unit.test_message_codec import RECORD_KWARGS

STORED = load_jsonl("stored_messages.jsonl")


def record(topic: str, body: bytes, properties: str, sys_flag: int = 0) -> bytearray:
    return encode_record(
        topic=topic, body=body, properties=properties, sys_flag=sys_flag, queue_id=0,
        born_timestamp=1, born_host=("127.0.0.1", 1), store_timestamp=2,
        store_host=("127.0.0.1", 10911),
    )  # fmt: skip


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
    body = b"".join(encode_record(**{**r, "sys_flag": r["sys_flag"] & ~1}) for r in records)
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


def test_prepared_is_read_without_parsing_other_messages() -> None:
    prepared = {MessageConst.PROPERTY_TRANSACTION_PREPARED: "TRUE", "UNIQ_KEY": "U1"}
    plain = {"UNIQ_KEY": "U2"}
    body = b"".join(record("T", b"x", properties_to_string(p)) for p in (prepared, plain))
    first, second = pulled_messages(body)
    assert first.is_prepared and not second.is_prepared
