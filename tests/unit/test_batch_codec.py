"""Batch bodies (SEND_BATCH_MESSAGE, C++ SEND_MESSAGE with batch=1)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common.batch_codec import (
    BATCH_ENTRY_MIN_SIZE,
    count_batch_entries,
    decode_batch,
    decode_batch_entries,
    encode_batch,
    merge_batch_properties,
    py_count_batch_entries,
)
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.message import Message
from aiorocketmq.common.message_codec import decode_record, encode_record
from aiorocketmq.common.properties import properties_to_string, string_to_properties
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip, use_batch_codec_kernel
from tests.support.vectors import load_jsonl


def _cpp_batch_frame() -> dict[str, Any]:
    frames = load_jsonl("cpp_client.jsonl")
    batches = [
        f
        for f in frames
        if f["scenario"] == "cpp_producer"
        and f["origin"] == "client"
        and f["code"] == 10
        and f["header"]["extFields"].get("batch") == "1"
    ]
    assert len(batches) == 1
    return batches[0]


def _frame_body(frame: bytes) -> bytes:
    length, info = struct.unpack_from(">ii", frame)
    assert length == len(frame) - 4
    return frame[8 + (info & 0xFFFFFF) :]


def java_encode_message(flag: int, body: bytes, properties: str) -> bytes:
    """A literal port of ``MessageDecoder.encodeMessage`` (4.9.x)."""
    props = properties.encode()
    store_size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return (
        struct.pack(">iiiii", store_size, 0, 0, flag, len(body))
        + body
        + struct.pack(">h", len(props))
        + props
    )


def test_cpp_batch_body_from_the_vectors() -> None:
    frame = _cpp_batch_frame()
    body = _frame_body(bytes.fromhex(frame["frame_hex"]))
    assert len(body) == frame["body_len"] == 226
    assert frame["header"]["extFields"]["properties"] == "WAIT\x01true\x02"
    entries = decode_batch_entries(body)
    assert [bytes(e.body) for e in entries] == [b"batch body 0", b"batch body 1"]
    assert [e.flag for e in entries] == [0, 0]
    for index, entry in enumerate(entries):
        assert entry.properties_raw.endswith("\x02")  # C++ writes the trailing separator
        props = entry.properties
        assert props["KEYS"] == f"key-batch-{index}"
        assert props["TAGS"] == "TagA"
        assert props["WAIT"] == "true"
        assert len(props["UNIQ_KEY"]) == 32
        assert entry.body.obj is body  # a view, not a copy
    messages = decode_batch(body, topic="TopicTest")
    assert [m.topic for m in messages] == ["TopicTest", "TopicTest"]
    assert messages[1].body == b"batch body 1"
    assert messages[1].keys == ["key-batch-1"]
    # Our encoding drops the trailing separator, so bytes differ; the content does not.
    again = decode_batch(encode_batch(messages), topic="TopicTest")
    assert again == messages
    # Each entry follows Java's encodeMessage exactly, trailing separator included.
    rebuilt = b"".join(
        java_encode_message(e.flag, bytes(e.body), e.properties_raw) for e in entries
    )
    assert rebuilt == body


def test_encode_matches_java_encode_message() -> None:
    messages = [
        Message("T", b"hello", 3, {"TAGS": "TagA", "UNIQ_KEY": "ABC"}),
        Message("T", b"", -1, {}),
        Message("T", memoryview(b"view body"), 0, {"KEYS": "a b"}),
    ]
    expected = b"".join(
        java_encode_message(m.flag, bytes(m.body), properties_to_string(m.properties))
        for m in messages
    )
    assert encode_batch(messages) == expected
    assert encode_batch([]) == b""


def test_stored_batch_records_carry_inner_then_batch_properties() -> None:
    # What the broker stores per entry: a v1 record whose properties are the entry's
    # followed by the batch-level ones (4.9 MessageExtEncoder).
    frame = _cpp_batch_frame()
    entries = decode_batch_entries(_frame_body(bytes.fromhex(frame["frame_hex"])))
    batch_props = "WAIT\x01true\x02CLUSTER\x01DefaultCluster"
    for entry in entries:
        merged = merge_batch_properties(entry.properties_raw, batch_props)
        record = encode_record(
            topic="TopicTest",
            body=entry.body,
            properties=merged,
            queue_id=0,
            flag=entry.flag,
            born_timestamp=1,
            born_host=("127.0.0.1", 1),
            store_timestamp=2,
            store_host=("127.0.0.1", 2),
        )
        view = decode_record(record, check_crc=True)
        assert view.body == bytes(entry.body)
        assert view.properties == {**entry.properties, "CLUSTER": "DefaultCluster"}


@pytest.mark.parametrize(
    ("inner", "batch", "expected"),
    [
        ("a\x01b", "WAIT\x01true", "a\x01b\x02WAIT\x01true"),
        ("a\x01b\x02", "WAIT\x01true", "a\x01b\x02WAIT\x01true"),
        ("", "WAIT\x01true", "WAIT\x01true"),
        ("a\x01b", "", "a\x01b"),
        ("", "", ""),
    ],
)
def test_merge_batch_properties(inner: str, batch: str, expected: str) -> None:
    assert merge_batch_properties(inner, batch) == expected


_NAME = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x01\x02"), min_size=1, max_size=8
)
_PROPS = st.dictionaries(_NAME, _NAME, max_size=4)
_MESSAGES = st.lists(
    st.builds(
        Message,
        topic=st.just("T"),
        body=st.binary(max_size=100),
        flag=st.integers(-(2**31), 2**31 - 1),
        properties=_PROPS,
    ),
    max_size=6,
)


@given(_MESSAGES)
def test_round_trip(messages: list[Message]) -> None:
    body = encode_batch(messages)
    assert decode_batch(body, topic="T") == messages
    assert encode_batch(decode_batch(body, topic="T")) == body


@given(_PROPS, _PROPS, st.booleans())
def test_merged_properties_parse_as_inner_then_batch(
    inner: dict[str, str], batch: dict[str, str], trailing: bool
) -> None:
    inner_raw = properties_to_string(inner) + ("\x02" if trailing and inner else "")
    merged = merge_batch_properties(inner_raw, properties_to_string(batch))
    assert string_to_properties(merged) == {**inner, **batch}


@given(st.binary(max_size=300))
def test_random_bytes_give_entries_or_protocol_error(data: bytes) -> None:
    _check_decodes_or_fails(data)


def _check_decodes_or_fails(data: bytes) -> int:
    """Decode ``data``: entries that tile it exactly, or a RemoteProtocolError (-1)."""
    try:
        entries = decode_batch_entries(data)
    except RemoteProtocolError:
        return -1
    sizes = [
        BATCH_ENTRY_MIN_SIZE
        + len(e.body)
        + len(e.properties_raw.encode("utf-8", "surrogateescape"))
        for e in entries
    ]
    assert sum(sizes) == len(data)
    assert [m.body for m in decode_batch(data)] == [bytes(e.body) for e in entries]
    return len(entries)


@given(_MESSAGES.filter(bool), st.data())
def test_truncated_or_mutated_bodies_give_entries_or_protocol_error(
    messages: list[Message], data: st.DataObject
) -> None:
    body = bytearray(encode_batch(messages))
    cut = data.draw(st.integers(0, len(body)))
    assert _check_decodes_or_fails(bytes(body[:cut])) <= len(messages)
    position = data.draw(st.integers(0, len(body) - 1))
    body[position] = data.draw(st.integers(0, 255))
    _check_decodes_or_fails(bytes(body))


def test_bounds_are_checked() -> None:
    good = encode_batch([Message("T", b"abc", 0, {"k": "v"})])
    with pytest.raises(RemoteProtocolError, match="bytes left"):
        decode_batch_entries(good[:21])
    with pytest.raises(RemoteProtocolError, match="properties length 3"):
        decode_batch_entries(good[:-1])
    with pytest.raises(RemoteProtocolError, match="body length 3"):
        decode_batch_entries(good[:24])
    bad_body = bytearray(good)
    struct.pack_into(">i", bad_body, 16, -1)
    with pytest.raises(RemoteProtocolError, match="body length -1"):
        decode_batch_entries(bad_body)
    bad_props = bytearray(good)
    struct.pack_into(">h", bad_props, 23, -2)
    with pytest.raises(RemoteProtocolError, match="properties length -2"):
        decode_batch_entries(bad_props)
    bad_total = bytearray(good)
    struct.pack_into(">i", bad_total, 0, len(good) + 1)
    with pytest.raises(RemoteProtocolError, match="totalSize"):
        decode_batch_entries(bad_total)
    three = good * 3
    assert len(decode_batch_entries(three, max_messages=3)) == 3
    with pytest.raises(RemoteProtocolError, match="more than 2 messages"):
        decode_batch_entries(three, max_messages=2)
    assert decode_batch_entries(b"") == []


def test_encode_rejects_what_the_format_cannot_carry() -> None:
    with pytest.raises(LocalProtocolError):
        encode_batch([Message("T", b"", 0, {"k": "v" * 32767})])
    with pytest.raises(LocalProtocolError):
        encode_batch([Message("T", b"", 2**31, {})])
    with pytest.raises(LocalProtocolError):
        encode_batch([Message("T", b"", 0, {"bad\x02": "v"})])
    with pytest.raises(LocalProtocolError):
        encode_batch([Message("T", b"", 0, {"lone": "\ud800"})])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_count_batch_entries_stops_one_past_the_bound(
    implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_batch_codec_kernel(implementation, monkeypatch)
    body = encode_batch(Message("T", b"x" * i) for i in range(10))
    assert count_batch_entries(body, stop_after=100) == 10
    assert count_batch_entries(memoryview(body), stop_after=3) == 4
    assert count_batch_entries(b"", stop_after=3) == 0
    # Garbage ends the count instead of looping: a zero or negative TOTALSIZE.
    assert count_batch_entries(b"\x00\x00\x00\x00" * 8, stop_after=100) == 0
    assert count_batch_entries(b"\xff\xff\xff\xff", stop_after=100) == 0

    with pytest.raises(TypeError, match="C-contiguous"):  # the reference's answer
        count_batch_entries(memoryview(body)[::2], stop_after=100)


@given(
    body=st.binary(max_size=64)
    | st.lists(st.integers(-5, 40), max_size=12).map(
        lambda sizes: b"".join(struct.pack(">i", n) + bytes(max(n - 4, 0)) for n in sizes)
    ),
    stop_after=st.integers(0, 12),
)
def test_the_count_kernel_counts_as_the_reference(body: bytes, stop_after: int) -> None:
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    expected = py_count_batch_entries(body, stop_after=stop_after)
    assert kernel.count_batch_entries(body, stop_after) == expected
    assert kernel.count_batch_entries(bytearray(body), stop_after) == expected
