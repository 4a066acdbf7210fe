"""The HA codec: reports and transfer frames, whole or in any chunking, and bad input.

Pure: no sockets, no loop. The h11 invariant (any split of a valid stream decodes
to the same values) is checked with Hypothesis, and every malformed value raises
``HAProtocolError`` and leaves the decoder broken.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.broker.ha.codec import (
    HEADER_SIZE,
    REPORT_SIZE,
    HAProtocolError,
    ReportDecoder,
    TransferDecoder,
    TransferFrame,
    encode_header,
    encode_report,
)
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError

INT64_MAX = (1 << 63) - 1
offsets = st.integers(min_value=0, max_value=INT64_MAX)
frames = st.lists(st.builds(TransferFrame, offsets, st.binary(max_size=300)), max_size=12)


def _encode_frames(items: list[TransferFrame]) -> bytes:
    return b"".join(encode_header(f.master_offset, len(f.body)) + f.body for f in items)


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(c, len(data)) for c in cuts})
    pieces, start = [], 0
    for point in [*points, len(data)]:
        pieces.append(data[start:point])
        start = point
    return pieces


def test_layouts_are_java_longs_and_ints() -> None:
    assert encode_report(0x0102030405060708) == bytes(range(1, 9))
    assert len(encode_report(0)) == REPORT_SIZE
    header = encode_header(65536, 32768)
    assert header == struct.pack(">qi", 65536, 32768) and len(header) == HEADER_SIZE


@pytest.mark.parametrize("bad", [-1, 1 << 63])
def test_encoders_refuse_values_the_format_cannot_carry(bad: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_report(bad)
    with pytest.raises(LocalProtocolError):
        encode_header(bad, 0)


@pytest.mark.parametrize("size", [-1, 1 << 31])
def test_header_refuses_a_bad_body_size(size: int) -> None:
    with pytest.raises(LocalProtocolError):
        encode_header(0, size)


@given(st.lists(offsets, max_size=20), st.lists(st.integers(0, 200), max_size=10))
def test_reports_decode_identically_in_any_chunking(values: list[int], cuts: list[int]) -> None:
    stream = b"".join(encode_report(v) for v in values)
    whole = ReportDecoder().feed(stream)
    decoder = ReportDecoder()
    chunked = [v for piece in _split(stream, cuts) for v in decoder.feed(piece)]
    assert whole == chunked == values
    assert decoder.buffered == 0


def test_report_decoder_holds_back_a_partial_report() -> None:
    decoder = ReportDecoder()
    data = encode_report(7) + encode_report(9)
    assert decoder.feed(data[:11]) == [7]
    assert decoder.buffered == 3
    assert decoder.feed(data[11:]) == [9]


@given(frames, st.lists(st.integers(0, 4000), max_size=12))
def test_frames_decode_identically_in_any_chunking(
    items: list[TransferFrame], cuts: list[int]
) -> None:
    stream = _encode_frames(items)
    assert TransferDecoder().feed(stream) == items
    decoder = TransferDecoder()
    chunked = [f for piece in _split(stream, cuts) for f in decoder.feed(piece)]
    assert chunked == items
    assert decoder.buffered == 0


@given(frames)
def test_frames_decode_byte_at_a_time(items: list[TransferFrame]) -> None:
    stream = _encode_frames(items)
    decoder = TransferDecoder()
    got = [f for i in range(len(stream)) for f in decoder.feed(stream[i : i + 1])]
    assert got == items


def test_heartbeat_frame_is_empty_and_ends_where_it_starts() -> None:
    (frame,) = TransferDecoder().feed(encode_header(4096, 0))
    assert frame == TransferFrame(4096, b"") and frame.end_offset == 4096


def test_negative_report_raises_and_poisons_the_decoder() -> None:
    decoder = ReportDecoder()
    with pytest.raises(HAProtocolError, match="negative"):
        decoder.feed(struct.pack(">q", -5))
    with pytest.raises(HAProtocolError):
        decoder.feed(encode_report(1))


@pytest.mark.parametrize(
    ("header", "match"),
    [
        (struct.pack(">qi", -1, 0), "negative HA frame offset"),
        (struct.pack(">qi", 0, -1), "negative HA frame body size"),
        (struct.pack(">qi", 0, 1025), "exceeds the limit"),
    ],
)
def test_bad_headers_raise_a_typed_error_at_once(header: bytes, match: str) -> None:
    decoder = TransferDecoder(max_body_size=1024)
    # The frame before the bad header is delivered; the error comes from the header
    # alone (no body needs to arrive) and is raised by the next call.
    assert decoder.feed(encode_header(0, 3) + b"abc" + header) == [TransferFrame(0, b"abc")]
    assert isinstance(decoder.error, HAProtocolError) and decoder.buffered == 0
    with pytest.raises(HAProtocolError, match=match) as info:
        decoder.feed(encode_header(3, 0))
    assert isinstance(info.value, RemoteProtocolError)
    fresh = TransferDecoder(max_body_size=1024)
    with pytest.raises(HAProtocolError, match=match):
        fresh.feed(header)


@given(st.binary(max_size=200), st.lists(st.integers(0, 200), max_size=6))
def test_random_bytes_give_frames_or_a_protocol_error(data: bytes, cuts: list[int]) -> None:
    decoder = TransferDecoder(max_body_size=64)
    got: list[TransferFrame] = []
    try:
        for piece in _split(data, cuts):
            got += decoder.feed(piece)
    except HAProtocolError:
        assert decoder.error is not None
    assert all(f.master_offset >= 0 and len(f.body) <= 64 for f in got)
    # Whatever came out is a prefix of the input, re-encoded byte for byte.
    assert data.startswith(_encode_frames(got))
    if decoder.error is None:
        assert _encode_frames(got) == data[: len(data) - decoder.buffered]


@given(st.binary(max_size=100))
def test_random_bytes_give_reports_or_a_protocol_error(data: bytes) -> None:
    try:
        got = ReportDecoder().feed(data)
    except HAProtocolError:
        assert any(v < 0 for (v,) in struct.iter_unpack(">q", data[: len(data) // 8 * 8]))
        return
    assert b"".join(encode_report(v) for v in got) == data[: len(data) // 8 * 8]
