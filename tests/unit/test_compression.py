"""Body compression: zlib level 5, compression-type bits, bounded inflation."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common.compression import compress_body, decompress_body, inflate_bounded
from aiorocketmq.common.constants import compression_type
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError

BODY = b"x" * 5000


def test_compress_uses_level_5_like_the_clients() -> None:
    packed = compress_body(BODY)
    assert packed[:2] == b"\x78\x5e"  # zlib header for level 5, as the C++ capture shows
    assert packed == zlib.compress(BODY, 5)
    assert compress_body(BODY, 6)[:2] == b"\x78\x9c"  # ali-ons, zlib's default
    with pytest.raises(LocalProtocolError):
        compress_body(BODY, 10)


@pytest.mark.parametrize("sys_flag", [0x1, 0x301, 0x1 | 0x8, 0x1 | 0x10])
def test_zlib_bodies_inflate(sys_flag: int) -> None:
    assert decompress_body(compress_body(BODY), sys_flag) == BODY
    assert decompress_body(memoryview(zlib.compress(BODY, 9)), sys_flag) == BODY


def test_uncompressed_bodies_pass_through() -> None:
    raw = compress_body(BODY)
    assert decompress_body(raw, 0) == raw
    assert decompress_body(bytearray(b"abc"), 0x300) == b"abc"  # type bits without bit 0


@pytest.mark.parametrize(("sys_flag", "name"), [(0x101, "LZ4"), (0x201, "ZSTD")])
def test_lz4_and_zstd_are_unsupported(sys_flag: int, name: str) -> None:
    with pytest.raises(RemoteProtocolError, match=f"unsupported compression {name}"):
        decompress_body(compress_body(BODY), sys_flag)


@pytest.mark.parametrize("sys_flag", [0x401, 0x501, 0x701])
def test_unknown_compression_types_are_errors(sys_flag: int) -> None:
    with pytest.raises(RemoteProtocolError, match="unknown compression type"):
        decompress_body(compress_body(BODY), sys_flag)
    with pytest.raises(RemoteProtocolError):
        compression_type(sys_flag)


def test_inflation_is_bounded() -> None:
    bomb = zlib.compress(bytes(10 * 1024 * 1024), 9)  # ~10 KiB that inflate to 10 MiB
    assert len(bomb) < 20_000
    with pytest.raises(RemoteProtocolError, match="beyond 1048576"):
        decompress_body(bomb, 0x1, max_size=1024 * 1024)
    assert decompress_body(compress_body(BODY), 0x1, max_size=5000) == BODY
    with pytest.raises(RemoteProtocolError):
        decompress_body(compress_body(BODY), 0x1, max_size=4999)
    assert inflate_bounded(zlib.compress(b""), 0) == b""
    with pytest.raises(LocalProtocolError):
        inflate_bounded(zlib.compress(b""), -1)


def test_bad_streams_are_remote_errors() -> None:
    packed = compress_body(BODY)
    with pytest.raises(RemoteProtocolError, match="ends before"):
        decompress_body(packed[:-6], 0x1)
    with pytest.raises(RemoteProtocolError, match="not a valid zlib stream"):
        decompress_body(b"not zlib at all", 0x1)
    # Bytes after the end of the stream are ignored, as Java's InflaterInputStream does.
    assert decompress_body(packed + b"trailing", 0x1) == BODY


@given(st.binary(max_size=300))
def test_random_bytes_inflate_or_fail_remotely(data: bytes) -> None:
    try:
        out = decompress_body(data, 0x1, max_size=10_000)
    except RemoteProtocolError:
        return
    assert len(out) <= 10_000


@given(st.binary(max_size=5000), st.integers(0, 9))
def test_round_trip(body: bytes, level: int) -> None:
    assert decompress_body(compress_body(body, level), 0x301) == body
