"""CommitLog record codec: golden vectors, round trips, stop rules, limits, robustness."""

from __future__ import annotations

import json
import mmap
import struct
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from aiorocketmq.common.compression import decompress_body
from aiorocketmq.common.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    MessageSysFlag,
)
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.message_codec import (
    BlankRecordError,
    RecordScanner,
    RecordView,
    StopReason,
    blank_record,
    calc_msg_length,
    decode_pull_body,
    decode_record,
    encode_record,
    is_blank_record,
    iter_records,
    patch_record,
    scan_records,
)
from aiorocketmq.common.msg_id import create_offset_msg_id
from aiorocketmq.common.properties import properties_to_string, string_to_properties
from aiorocketmq.common.tag_hash import tags_code
from tests.support.vectors import load_jsonl

STORED = load_jsonl("stored_messages.jsonl")


def _split_host(text: str) -> tuple[str, int]:
    ip, port = text.rsplit(":", 1)
    return ip, int(port)


def _frame_body(frame: bytes) -> bytes:
    # length | header info (type << 24 | header length) | header | body
    length, info = struct.unpack_from(">ii", frame)
    assert length == len(frame) - 4
    assert info >> 24 == 0  # every captured frame has a JSON header
    header_len = info & 0xFFFFFF
    json.loads(frame[8 : 8 + header_len])
    return frame[8 + header_len :]


def _pull_reply_frames() -> list[dict[str, Any]]:
    lines = load_jsonl("cpp_client.jsonl") + load_jsonl("alions_client.jsonl")
    return [d for d in lines if d.get("reply_to_code") == 11 and d["code"] == 0]


def _kwargs_of(view: RecordView) -> dict[str, Any]:
    return {
        "topic": view.topic,
        "body": view.body_view,
        "properties": view.properties_raw,
        "queue_id": view.queue_id,
        "flag": view.flag,
        "queue_offset": view.queue_offset,
        "physical_offset": view.physical_offset,
        "sys_flag": view.sys_flag,
        "born_timestamp": view.born_timestamp,
        "born_host": view.born_host,
        "store_timestamp": view.store_timestamp,
        "store_host": view.store_host,
        "reconsume_times": view.reconsume_times,
        "prepared_transaction_offset": view.prepared_transaction_offset,
        "body_crc": view.body_crc,
    }


def _record(**overrides: Any) -> bytearray:
    kwargs: dict[str, Any] = {
        "topic": "TopicTest",
        "body": b"hello",
        "properties": "TAGS\x01TagA\x02KEYS\x01k1",
        "queue_id": 1,
        "flag": 0,
        "queue_offset": 7,
        "physical_offset": 1000,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000,
        "born_host": ("10.0.0.1", 50000),
        "store_timestamp": 1_700_000_000_005,
        "store_host": ("10.0.0.2", 10911),
        "reconsume_times": 0,
        "prepared_transaction_offset": 0,
    }
    kwargs.update(overrides)
    return encode_record(**kwargs)


# --------------------------------------------------------------------------- golden vectors


@pytest.mark.parametrize("vec", STORED, ids=[v["name"] for v in STORED])
def test_stored_vector_decodes_to_listed_fields(vec: dict[str, Any]) -> None:
    raw = bytes.fromhex(vec["record_hex"])
    view = decode_record(raw, check_crc=True)
    assert view.total_size == vec["totalSize"] == vec["record_len"] == len(raw)
    assert view.magic == MESSAGE_MAGIC_CODE
    assert f"{view.magic & 0xFFFFFFFF:#010X}".replace("0X", "0x") == vec["magicCode"]
    assert view.body_crc == vec["bodyCRC"] == zlib.crc32(view.body) & 0x7FFFFFFF
    for attr, key in [
        ("queue_id", "queueId"),
        ("flag", "flag"),
        ("queue_offset", "queueOffset"),
        ("physical_offset", "physicalOffset"),
        ("sys_flag", "sysFlag"),
        ("born_timestamp", "bornTimestamp"),
        ("store_timestamp", "storeTimestamp"),
        ("reconsume_times", "reconsumeTimes"),
        ("prepared_transaction_offset", "preparedTransactionOffset"),
        ("topic", "topic"),
        ("properties_raw", "properties_raw"),
        ("properties", "properties"),
        ("tags_code", "tagsCode"),
        ("msg_id", "offsetMsgId"),
    ]:
        assert getattr(view, attr) == vec[key], attr
    assert view.born_host == _split_host(vec["bornHost"])
    assert view.store_host == _split_host(vec["storeHost"])
    assert view.body_len == vec["body_len"]
    assert view.body == bytes.fromhex(vec["body_hex"])
    assert view.tags == vec["properties"].get("TAGS")
    assert view.uniq_key == vec["properties"].get("UNIQ_KEY")
    assert view.keys == (
        vec["properties"]["KEYS"].split(" ") if "KEYS" in vec["properties"] else []
    )
    assert view.end == len(raw)
    assert view.msg_id == create_offset_msg_id(*view.store_host, view.physical_offset)


@pytest.mark.parametrize("vec", STORED, ids=[v["name"] for v in STORED])
def test_stored_vector_reencodes_to_identical_bytes(vec: dict[str, Any]) -> None:
    raw = bytes.fromhex(vec["record_hex"])
    view = decode_record(raw)
    assert bytes(encode_record(**_kwargs_of(view))) == raw
    # Without an explicit CRC the encoder computes the same one.
    kwargs = _kwargs_of(view)
    del kwargs["body_crc"]
    assert bytes(encode_record(**kwargs)) == raw


@pytest.mark.parametrize("vec", [v for v in STORED if v["sysFlag"] & 1], ids=lambda v: v["name"])
def test_stored_compressed_bodies_inflate(vec: dict[str, Any]) -> None:
    view = decode_record(bytes.fromhex(vec["record_hex"]))
    body = decompress_body(view.body_view, view.sys_flag)
    assert len(body) == vec["body_inflated_len"]
    assert body.decode().startswith(vec["body_inflated_utf8_prefix"])


def test_stored_vector_to_message_ext() -> None:
    vec = STORED[0]
    view = decode_record(bytes.fromhex(vec["record_hex"]))
    ext = view.to_message_ext()
    assert ext.topic == vec["topic"]
    assert ext.body == bytes.fromhex(vec["body_hex"])
    assert isinstance(ext.body, bytes)
    assert ext.properties == vec["properties"]
    assert ext.msg_id == vec["offsetMsgId"]
    assert ext.commit_log_offset == vec["physicalOffset"]
    assert ext.store_size == vec["totalSize"]
    assert ext.born_host == _split_host(vec["bornHost"])
    assert ext.tags == "TagA"
    no_copy = view.to_message_ext(copy_body=False)
    assert isinstance(no_copy.body, memoryview)
    assert no_copy.body == ext.body


def test_pull_reply_bodies_decode_as_record_runs() -> None:
    frames = _pull_reply_frames()
    assert frames
    total = 0
    bodies: dict[tuple[str, int], bytes] = {}
    for frame in frames:
        body = _frame_body(bytes.fromhex(frame["frame_hex"]))
        assert len(body) == frame["body_len"]
        records = decode_pull_body(body, check_crc=True)
        assert records
        assert sum(r.total_size for r in records) == len(body)
        assert [r.position for r in records] == [0, *(r.end for r in records[:-1])]
        assert all(r.topic == "TopicTest" and r.store_host == ("127.0.0.1", 20911) for r in records)
        assert [bytes(r.raw) for r in iter_records(body)] == [bytes(r.raw) for r in records]
        total += len(records)
        bodies[frame["scenario"], frame["seq"]] = body
    assert total == 31  # as the vectors README states
    # Records in pull replies are byte-identical to the stored ones.
    for vec in STORED:
        for seen in vec["seen_in_pull_replies"]:
            body = bodies[seen["scenario"], seen["seq"]]
            assert bytes.fromhex(vec["record_hex"]) in body


# --------------------------------------------------------------------------- hypothesis


_IPV4 = st.ip_addresses(v=4).map(str)
_IPV6 = st.ip_addresses(v=6).map(str)
_HOST = st.tuples(st.one_of(_IPV4, _IPV6), st.integers(0, 0xFFFF))
_NONNEG32 = st.integers(0, 2**31 - 1)
_NONNEG64 = st.integers(0, 2**63 - 1)
_NAME = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x01\x02"),
    min_size=1,
    max_size=12,
)
_PROPS = st.one_of(
    st.dictionaries(_NAME, _NAME, max_size=5).map(properties_to_string),
    st.text(max_size=60),  # any string is a valid stored properties field
)
_TOPIC = st.text(max_size=40).filter(lambda t: len(t.encode()) <= 127)

RECORD_KWARGS = st.fixed_dictionaries(
    {
        "topic": _TOPIC,
        "body": st.binary(max_size=200),
        "properties": _PROPS,
        "queue_id": _NONNEG32,
        "flag": st.integers(-(2**31), 2**31 - 1),
        "queue_offset": _NONNEG64,
        "physical_offset": _NONNEG64,
        "sys_flag": st.integers(0, 0xFFFF),
        "born_timestamp": _NONNEG64,
        "born_host": _HOST,
        "store_timestamp": _NONNEG64,
        "store_host": _HOST,
        "reconsume_times": _NONNEG32,
        "prepared_transaction_offset": _NONNEG64,
    }
)


def _expected_sys_flag(kwargs: dict[str, Any]) -> int:
    flag = kwargs["sys_flag"] & ~0x30
    if ":" in kwargs["born_host"][0]:
        flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if ":" in kwargs["store_host"][0]:
        flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    return flag


@given(RECORD_KWARGS)
def test_decode_of_encode_gives_the_fields_back(kwargs: dict[str, Any]) -> None:
    raw = encode_record(**kwargs)
    topic_len = len(kwargs["topic"].encode())
    props_len = len(kwargs["properties"].encode())
    sys_flag = _expected_sys_flag(kwargs)
    assert len(raw) == calc_msg_length(sys_flag, len(kwargs["body"]), topic_len, props_len)
    view = decode_record(raw, check_crc=True)
    got = _kwargs_of(view)
    assert got.pop("body_crc") == zlib.crc32(kwargs["body"]) & 0x7FFFFFFF
    assert got.pop("sys_flag") == sys_flag
    assert bytes(got.pop("body")) == kwargs["body"]
    expected = dict(kwargs)
    del expected["sys_flag"], expected["body"]
    assert got == expected
    assert view.total_size == len(raw)
    assert view.properties == string_to_properties(kwargs["properties"])


@given(RECORD_KWARGS)
def test_encode_of_decode_gives_the_bytes_back(kwargs: dict[str, Any]) -> None:
    raw = bytes(encode_record(**kwargs))
    assert bytes(encode_record(**_kwargs_of(decode_record(raw)))) == raw


@given(st.lists(RECORD_KWARGS, min_size=1, max_size=6), st.data())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_whole_buffer_and_record_by_record_agree(
    records: list[dict[str, Any]], data: st.DataObject
) -> None:
    buf = b"".join(encode_record(**kw) for kw in records)
    whole = [bytes(v.raw) for v in iter_records(buf)]
    one_by_one = []
    pos = 0
    while pos < len(buf):
        view = decode_record(buf, pos)
        one_by_one.append(bytes(view.raw))
        pos = view.end
    assert whole == one_by_one
    assert len(whole) == len(records)
    # Data arriving in pieces: resume a scanner at its position with a longer range.
    cuts = sorted(data.draw(st.lists(st.integers(0, len(buf)), max_size=5)))
    pieces: list[bytes] = []
    pos = 0
    for cut in [*cuts, len(buf)]:
        scanner = RecordScanner(buf, pos, max(cut, pos))
        pieces.extend(bytes(v.raw) for v in scanner)
        pos = scanner.position
    assert pieces == whole


@given(st.lists(RECORD_KWARGS, min_size=1, max_size=4), st.data())
def test_every_prefix_stops_at_a_record_boundary(
    records: list[dict[str, Any]], data: st.DataObject
) -> None:
    encoded = [bytes(encode_record(**kw)) for kw in records]
    buf = b"".join(encoded)
    boundaries = [0]
    for rec in encoded:
        boundaries.append(boundaries[-1] + len(rec))
    cut = data.draw(st.integers(0, len(buf)))
    views, stop = scan_records(buf, 0, cut)
    last = max(b for b in boundaries if b <= cut)
    assert [bytes(v.raw) for v in views] == encoded[: boundaries.index(last)]
    assert stop.offset == last
    if cut == last:
        assert stop.reason is StopReason.END
    elif cut - last < 4:
        # Fewer than 4 bytes of a TOTALSIZE that starts with zero bytes: indistinguishable
        # from the zeroed tail of a preallocated file.
        assert stop.reason in (StopReason.ZERO, StopReason.TRUNCATED)
    else:
        assert stop.reason is StopReason.TRUNCATED
        with pytest.raises(RemoteProtocolError):
            list(iter_records(buf, 0, cut))


def _decode_outcome(buf: bytes, check_crc: bool) -> None:
    views, stop = scan_records(buf, check_crc=check_crc)  # never raises
    assert stop.offset == (views[-1].end if views else 0)
    try:
        seen = [v.total_size for v in iter_records(buf, check_crc=check_crc)]
    except RemoteProtocolError:
        assert not stop.clean
    else:
        assert stop.clean
        assert seen == [v.total_size for v in views]
    try:
        view = decode_record(buf, check_crc=check_crc)
    except RemoteProtocolError:
        assert not views
    else:
        assert view.total_size == views[0].total_size
        # Everything a caller might read works on a record that decoded.
        view.to_message_ext()
        _ = view.tags_code, view.keys, view.msg_id


@given(st.binary(max_size=400), st.booleans())
def test_random_bytes_give_records_or_protocol_error(buf: bytes, check_crc: bool) -> None:
    _decode_outcome(buf, check_crc)


_FIELD_POSITIONS = [0, 4, 8, 36, 84, 88]  # TOTALSIZE, MAGIC, CRC, SYSFLAG, BODY length


@given(
    st.lists(RECORD_KWARGS, min_size=1, max_size=3),
    st.lists(
        st.tuples(
            st.one_of(st.sampled_from(_FIELD_POSITIONS), st.integers(0, 2000)),
            st.one_of(st.integers(0, 255), st.integers(-(2**31), 2**31 - 1)),
        ),
        min_size=1,
        max_size=4,
    ),
    st.booleans(),
)
def test_mutated_records_give_records_or_protocol_error(
    records: list[dict[str, Any]], mutations: list[tuple[int, int]], check_crc: bool
) -> None:
    buf = bytearray(b"".join(encode_record(**kw) for kw in records))
    for where, value in mutations:
        pos = where % len(buf)
        if 0 <= value <= 255:
            buf[pos] = value
        elif pos + 4 <= len(buf):
            struct.pack_into(">i", buf, pos, value)
    _decode_outcome(bytes(buf), check_crc)


@given(RECORD_KWARGS.filter(lambda kw: len(kw["body"]) > 0), st.data())
def test_a_flipped_body_byte_fails_the_crc_check(
    kwargs: dict[str, Any], data: st.DataObject
) -> None:
    raw = bytearray(encode_record(**kwargs))
    view = decode_record(raw)
    index = view.body_offset + data.draw(st.integers(0, view.body_len - 1))
    raw[index] ^= data.draw(st.integers(1, 255))
    decode_record(raw)  # the structure is still fine
    with pytest.raises(RemoteProtocolError, match="CRC"):
        decode_record(raw, check_crc=True)
    _, stop = scan_records(raw, check_crc=True)
    assert stop.reason is StopReason.CORRUPT


# --------------------------------------------------------------------------- stop rules


def test_iteration_stops_cleanly_at_a_blank_record() -> None:
    first, second = _record(queue_offset=0), _record(queue_offset=1)
    file_size = len(first) + len(second) + 40
    blank_size = file_size - len(first) - len(second)
    buf = bytearray(file_size)
    buf[: len(first)] = first
    buf[len(first) : len(first) + len(second)] = second
    buf[len(first) + len(second) : len(first) + len(second) + 8] = blank_record(blank_size)
    assert [v.queue_offset for v in iter_records(buf)] == [0, 1]
    views, stop = scan_records(buf)
    assert len(views) == 2
    assert stop.reason is StopReason.BLANK
    assert stop.clean
    assert stop.offset == len(first) + len(second)
    assert stop.blank_size == blank_size
    assert is_blank_record(buf, stop.offset)
    assert not is_blank_record(buf, 0)
    with pytest.raises(BlankRecordError) as info:
        decode_record(buf, stop.offset)
    assert info.value.size == blank_size
    assert info.value.position == stop.offset
    # A pull body never holds filler.
    with pytest.raises(RemoteProtocolError, match="BLANK"):
        decode_pull_body(bytes(buf))


@pytest.mark.parametrize("tail", [1, 3, 4, 7, 8, 100, 5000])
def test_iteration_stops_cleanly_at_zero_total_size(tail: int) -> None:
    rec = _record()
    buf = bytes(rec) + bytes(tail)  # a preallocated file, written up to len(rec)
    assert len(list(iter_records(buf))) == 1
    views, stop = scan_records(buf)
    assert len(views) == 1
    assert stop.reason is StopReason.ZERO
    assert stop.offset == len(rec)
    with pytest.raises(RemoteProtocolError):
        decode_record(buf, len(rec))
    with pytest.raises(RemoteProtocolError):
        decode_pull_body(buf)


def test_end_of_data_is_a_clean_stop_and_empty_buffers_hold_nothing() -> None:
    rec = _record()
    views, stop = scan_records(rec)
    assert len(views) == 1
    assert stop.reason is StopReason.END
    assert stop.offset == len(rec)
    assert scan_records(b"")[1].reason is StopReason.END
    assert decode_pull_body(b"") == []
    with pytest.raises(RemoteProtocolError, match="no record"):
        decode_record(rec, len(rec))


def test_illegal_magic_and_inconsistent_sizes_are_corrupt() -> None:
    rec = _record()
    bad_magic = bytearray(rec)
    struct.pack_into(">i", bad_magic, 4, 0x12345678)
    with pytest.raises(RemoteProtocolError, match="illegal magic code 0x12345678"):
        decode_record(bad_magic)
    grown = bytearray(rec) + b"\0\0\0\0"
    struct.pack_into(">i", grown, 0, len(rec) + 4)
    with pytest.raises(RemoteProtocolError, match="does not match its fields"):
        decode_record(grown)
    short = bytearray(rec)
    struct.pack_into(">i", short, 0, 90)
    with pytest.raises(RemoteProtocolError, match="below minimum"):
        decode_record(short)
    too_long = bytearray(rec)
    struct.pack_into(">i", too_long, 0, len(rec) + 1)
    _, stop = scan_records(too_long)
    assert stop.reason is StopReason.TRUNCATED
    negative_body = bytearray(rec)
    struct.pack_into(">i", negative_body, 84, -1)
    with pytest.raises(RemoteProtocolError, match="body length -1"):
        decode_record(negative_body)
    # A signed-byte topic length of 0x80 is -128.
    negative_topic = bytearray(rec)
    negative_topic[88 + 5] = 0x80
    with pytest.raises(RemoteProtocolError, match="topic length -128"):
        decode_record(negative_topic)


def test_range_arguments_are_checked() -> None:
    rec = _record()
    with pytest.raises(LocalProtocolError):
        decode_record(rec, len(rec) + 1)
    with pytest.raises(LocalProtocolError):
        RecordScanner(rec, 10, 5)
    with pytest.raises(LocalProtocolError):
        iter_records(rec, 0, len(rec) + 1)
    # ``end`` hides bytes that are present: the record no longer fits.
    with pytest.raises(RemoteProtocolError):
        decode_record(rec, 0, end=len(rec) - 1)


# --------------------------------------------------------------------------- layout details


def test_ipv4_layout_offsets_match_the_spec_table() -> None:
    rec = _record(body=b"xyz", topic="T", properties="a\x01b")
    assert len(rec) == 91 + 3 + 1 + 3
    fields = struct.unpack_from(">iiiiiqqiq4siq4siiqi", rec)
    assert fields[1] == MESSAGE_MAGIC_CODE
    assert fields[5] == 7 and fields[6] == 1000  # queue offset at 20, physical at 28
    assert struct.unpack_from(">q", rec, 56)[0] == 1_700_000_000_005  # store timestamp
    assert rec[48:52] == bytes([10, 0, 0, 1]) and rec[64:68] == bytes([10, 0, 0, 2])
    assert rec[88:91] == b"xyz" and rec[91] == 1 and rec[92:93] == b"T"
    assert struct.unpack_from(">h", rec, 93)[0] == 3


@pytest.mark.parametrize(
    ("born_ip", "store_ip", "bits", "store_ts_pos"),
    [
        ("10.0.0.1", "10.0.0.2", 0x00, 56),
        ("fe80::1", "10.0.0.2", 0x10, 68),
        ("10.0.0.1", "2001:db8::2", 0x20, 56),
        ("fe80::1", "2001:db8::2", 0x30, 68),
    ],
)
def test_v6_hosts_set_flags_shift_offsets_and_patch_in_place(
    born_ip: str, store_ip: str, bits: int, store_ts_pos: int
) -> None:
    # The caller's host-width bits are ignored: the addresses decide them.
    rec = _record(
        born_host=(born_ip, 1),
        store_host=(store_ip, 2),
        sys_flag=0x30 ^ bits | MessageSysFlag.COMPRESSED_FLAG,
        queue_offset=0,
        physical_offset=0,
        store_timestamp=0,
    )
    assert len(rec) == 91 + 12 * bin(bits).count("1") + 5 + 9 + len("TAGS\x01TagA\x02KEYS\x01k1")
    view = decode_record(rec)
    assert view.sys_flag == bits | MessageSysFlag.COMPRESSED_FLAG
    assert view.born_host == (born_ip, 1)
    assert view.store_host == (store_ip, 2)
    assert len(view.msg_id) == (56 if bits & 0x20 else 32)
    patch_record(rec, 0, queue_offset=42, physical_offset=4096, store_timestamp=123456789)
    assert struct.unpack_from(">q", rec, store_ts_pos)[0] == 123456789
    patched = decode_record(rec)
    assert (patched.queue_offset, patched.physical_offset) == (42, 4096)
    assert patched.store_timestamp == 123456789
    assert patched.born_timestamp == 1_700_000_000_000  # untouched
    direct = _record(
        born_host=(born_ip, 1),
        store_host=(store_ip, 2),
        sys_flag=MessageSysFlag.COMPRESSED_FLAG,
        queue_offset=42,
        physical_offset=4096,
        store_timestamp=123456789,
    )
    assert rec == direct


def test_patch_inside_a_larger_buffer() -> None:
    first, second = _record(), _record(born_host=("::1", 7))
    buf = bytearray(first + second)
    patch_record(buf, len(first), queue_offset=1, physical_offset=len(first), store_timestamp=9)
    views = list(iter_records(buf))
    assert views[0].queue_offset == 7 and views[0].store_timestamp == 1_700_000_000_005
    assert (views[1].queue_offset, views[1].physical_offset) == (1, len(first))
    assert views[1].store_timestamp == 9
    with pytest.raises(LocalProtocolError):
        patch_record(buf, len(buf) - 10, queue_offset=1, physical_offset=1, store_timestamp=1)
    with pytest.raises(LocalProtocolError):
        patch_record(buf, 0, queue_offset=2**63, physical_offset=1, store_timestamp=1)


def test_v2_magic_records_are_readable() -> None:
    # RocketMQ 5.1+ "v2": same record with a 2-byte topic length (and TOTALSIZE + 1).
    v1 = _record(topic="T" * 10)
    view = decode_record(v1)
    topic_pos = 88 + view.body_len
    v2 = bytearray(v1[:topic_pos]) + struct.pack(">h", 10) + v1[topic_pos + 1 :]
    struct.pack_into(">ii", v2, 0, len(v1) + 1, MESSAGE_MAGIC_CODE_V2)
    got = decode_record(v2)
    assert got.magic == MESSAGE_MAGIC_CODE_V2
    assert got.topic == "T" * 10
    assert got.properties_raw == view.properties_raw
    assert got.body == view.body
    assert [v.topic for v in iter_records(bytes(v2) + bytes(v1))] == ["T" * 10] * 2


def test_blank_record_bytes() -> None:
    assert blank_record(8) == struct.pack(">ii", 8, BLANK_MAGIC_CODE)
    assert blank_record(1 << 30)[:4] == (1 << 30).to_bytes(4, "big")
    for bad in (7, 0, -1, 2**31):
        with pytest.raises(LocalProtocolError):
            blank_record(bad)


# --------------------------------------------------------------------------- limits


def test_topic_limit_is_127_bytes() -> None:
    assert decode_record(_record(topic="t" * 127)).topic == "t" * 127
    with pytest.raises(LocalProtocolError, match="127"):
        _record(topic="t" * 128)
    with pytest.raises(LocalProtocolError, match="127"):
        _record(topic="é" * 64)  # 64 characters, 128 bytes
    with pytest.raises(LocalProtocolError):
        _record(topic=b"t" * 128)


def test_properties_limit_is_32767_bytes() -> None:
    ok = "k\x01" + "v" * 32765
    assert decode_record(_record(properties=ok)).properties_raw == ok
    with pytest.raises(LocalProtocolError, match="32767"):
        _record(properties=ok + "v")
    assert decode_record(_record(properties=ok.encode())).properties == {"k": "v" * 32765}


@pytest.mark.parametrize(
    "overrides",
    [
        {"queue_id": -1},
        {"queue_offset": -1},
        {"physical_offset": -5},
        {"reconsume_times": -1},
        {"born_timestamp": -1},
        {"store_timestamp": -1},
        {"prepared_transaction_offset": -1},
        {"sys_flag": -1},
        {"body_crc": -1},
        {"queue_id": 2**31},
        {"flag": 2**31},
        {"queue_offset": 2**63},
        {"body_crc": 2**31},
        {"born_host": ("10.0.0.1", 65536)},
        {"store_host": ("10.0.0.1", -1)},
        {"born_host": ("not-an-ip", 1)},
        {"store_host": ("300.0.0.1", 1)},
        {"topic": "\ud800"},
    ],
)
def test_values_the_record_cannot_carry_are_local_errors(overrides: dict[str, Any]) -> None:
    with pytest.raises(LocalProtocolError):
        _record(**overrides)


def test_negative_flag_is_a_legal_user_value() -> None:
    assert decode_record(_record(flag=-(2**31))).flag == -(2**31)


def test_calc_msg_length_follows_java() -> None:
    assert calc_msg_length(0, 0, 0, 0) == 91
    assert calc_msg_length(0, 10, 9, 100) == 91 + 10 + 9 + 100
    assert calc_msg_length(0x10, 1, 1, 1) == 91 + 12 + 3
    assert calc_msg_length(0x30, 1, 1, 1) == 91 + 24 + 3
    assert calc_msg_length(0, -5, 3, -1) == 94  # Java counts negative lengths as 0


# --------------------------------------------------------------------------- buffers


def test_views_work_on_every_buffer_kind_without_copying_bodies() -> None:
    data = _record(body=b"B" * 100) + _record(body=b"C" * 50, queue_offset=8)
    anon = mmap.mmap(-1, len(data))
    anon[:] = bytes(data)
    try:
        for buf in (bytes(data), bytearray(data), memoryview(data), anon):
            views = list(iter_records(buf))
            assert [v.body for v in views] == [b"B" * 100, b"C" * 50]
            assert [v.queue_offset for v in views] == [7, 8]
            body_view = views[0].body_view
            assert body_view.readonly
            assert body_view.obj is buf or body_view.obj is getattr(buf, "obj", None)
            assert bytes(views[1].raw) == bytes(data[len(views[0].raw) :])
            del body_view
        # Views hold the mmap object, not an exported buffer: closing still works.
        mapped_views = list(iter_records(anon))
        assert len(mapped_views) == 2
    finally:
        anon.close()
    # A memoryview of another item format is read as bytes.
    as_words = memoryview(bytes(data[: len(data) // 4 * 4])).cast("I")
    assert decode_record(as_words).body == b"B" * 100


def test_surrogate_escaped_text_round_trips_invalid_utf8() -> None:
    rec = bytearray(_record(topic="ab", properties="k\x01v"))
    view = decode_record(rec)
    topic_pos = view.body_offset + view.body_len + 1
    rec[topic_pos] = 0xFF  # not UTF-8
    bad = decode_record(rec)
    assert bad.topic == "\udcffb"
    assert bytes(encode_record(**_kwargs_of(bad))) == bytes(rec)


@given(RECORD_KWARGS)
def test_views_expose_tags_code_and_properties(kwargs: dict[str, Any]) -> None:
    assume(kwargs["properties"])
    view = decode_record(encode_record(**kwargs))
    props = string_to_properties(kwargs["properties"])
    assert view.properties == props
    assert view.tags == props.get("TAGS")
    assert view.tags_code == tags_code(props.get("TAGS"))
    assert view.raw.nbytes == view.total_size
