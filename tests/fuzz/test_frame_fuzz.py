"""Mutation fuzzing of the remoting decoders: frames, the three header forms, extFields.

Each test feeds ``AIOROCKETMQ_FUZZ_CASES`` (default 100,000) mutated inputs, seeded
from the frames the stock C++ client and ali-ons sent (``tests/vectors``), to
one decoder and fails on any exception other than the decoder's documented errors:
``RemoteProtocolError`` for frames and headers (``frame.py``: "nothing else
escapes"), ``HeaderFieldError`` for the extFields readers and typed headers. The
case rate is printed (``pytest -s`` shows it). A nightly run sets e.g.
``AIOROCKETMQ_FUZZ_CASES=5000000``.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable
from typing import Any

import pytest

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.remoting import broker_headers, namesrv_headers
from aiorocketmq.remoting import frame as frame_module
from aiorocketmq.remoting.errors import HeaderFieldError
from aiorocketmq.remoting.frame import (
    FrameDecoder,
    decode_frame_payload,
    decode_json_header,
    decode_msgpack_header,
    decode_rocketmq_header,
    encode_msgpack_header,
    encode_rocketmq_header,
)
from aiorocketmq.remoting.headers import (
    ext_bool,
    ext_int,
    ext_long,
    ext_opt_int,
    ext_opt_long,
    ext_str,
)
from tests.fuzz.mutate import FuzzReport, all_frames, client_frames, run_fuzz
from tests.support.kernels import IMPLEMENTATIONS, use_frame_kernel


@pytest.fixture(autouse=True, params=IMPLEMENTATIONS)
def _frame_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs on the MSGPACK C kernel and on the pure-Python reference."""
    use_frame_kernel(request.param, monkeypatch)


pytestmark = pytest.mark.fuzz

FRAMES = all_frames()
COMMANDS = [decode_frame_payload(frame[4:]) for frame in FRAMES]


def _assert_clean(report: FuzzReport) -> None:
    assert not report.findings, "\n\n".join(report.findings)
    # The unmutated seeds are valid, so the loop reached accepting code paths too.
    assert report.accepted >= 1, report.summary()
    assert report.rejected >= 1, report.summary()


def _encodable(encode: Callable[..., bytes]) -> list[bytes]:
    seeds = []
    for cmd in COMMANDS:
        try:
            seeds.append(encode(cmd))
        except LocalProtocolError:
            continue  # e.g. a code above a short for the ROCKETMQ form
    return seeds


def test_seed_frames_decode() -> None:
    assert len(client_frames()) > 200
    decoder = FrameDecoder()
    assert len(decoder.feed(b"".join(FRAMES))) == len(FRAMES)
    assert decoder.buffered == 0


@pytest.mark.parametrize("large_frame", [frame_module.LARGE_FRAME, 16])
def test_frame_decoder_whole_and_chunked(large_frame: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the large-frame path for big frames only, and for nearly every frame."""
    monkeypatch.setattr(frame_module, "LARGE_FRAME", large_frame)

    def feed(data: bytes) -> None:
        decoder = FrameDecoder(max_frame_length=1 << 20)
        cut = len(data) // 3
        decoder.feed(data[:cut])
        decoder.feed(data[cut:])
        decode_frame_payload(data[4:])

    _assert_clean(run_fuzz("FrameDecoder", FRAMES, feed, (RemoteProtocolError,)))


def _header_seed(frame: bytes) -> bytes:
    length = int.from_bytes(frame[4:8], "big") & 0xFFFFFF
    return frame[8 : 8 + length]


def test_json_header_decoder() -> None:
    seeds = [_header_seed(frame) for frame in FRAMES]
    _assert_clean(run_fuzz("decode_json_header", seeds, decode_json_header, (RemoteProtocolError,)))


def test_rocketmq_header_decoder() -> None:
    seeds = _encodable(encode_rocketmq_header)
    assert len(seeds) == len(COMMANDS)
    report = run_fuzz(
        "decode_rocketmq_header", seeds, decode_rocketmq_header, (RemoteProtocolError,)
    )
    _assert_clean(report)


def test_msgpack_header_decoder() -> None:
    seeds = _encodable(encode_msgpack_header)
    report = run_fuzz("decode_msgpack_header", seeds, decode_msgpack_header, (RemoteProtocolError,))
    _assert_clean(report)


def test_ext_field_readers() -> None:
    values = sorted({v for cmd in COMMANDS for v in cmd.ext_fields.values()})
    seeds = [v.encode("utf-8") for v in values] + [b"2147483648", b"-9223372036854775809"]
    readers = (ext_int, ext_long, ext_bool, ext_opt_int, ext_opt_long, ext_str)

    def read(data: bytes) -> None:
        fields = {"f": data.decode("utf-8", "surrogateescape")}
        for reader in readers:
            reader(fields, "f")

    _assert_clean(run_fuzz("ext_* readers", seeds, read, (HeaderFieldError,)))


def _header_classes() -> list[Any]:
    classes = []
    for module in (broker_headers, namesrv_headers):
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and hasattr(cls, "from_ext_fields"):
                classes.append(cls)
    return classes


def test_typed_headers_from_mutated_frames() -> None:
    classes = _header_classes()
    assert len(classes) >= 25
    parsers: list[Callable[[dict[str, str]], object]] = [c.from_ext_fields for c in classes]
    parsers.append(broker_headers.SendMessageRequestHeader.from_ext_fields_v2)
    turn = itertools.cycle(range(len(parsers)))

    def parse(data: bytes) -> None:
        fields = decode_frame_payload(data[4:]).ext_fields
        # Two parsers per case, rotating, so every class sees every kind of mutation.
        parsers[next(turn)](fields)
        parsers[next(turn)](fields)

    report = run_fuzz(
        "typed headers", client_frames(), parse, (RemoteProtocolError, HeaderFieldError)
    )
    _assert_clean(report)


def _accepted_pairs() -> list[tuple[Callable[[dict[str, str]], object], dict[str, str]]]:
    """(parser, captured extFields) pairs where the parser accepts the unmutated fields."""
    pairs = []
    for cls in _header_classes():
        for cmd in COMMANDS:
            try:
                cls.from_ext_fields(cmd.ext_fields)
            except HeaderFieldError:
                continue
            if cmd.ext_fields:
                pairs.append((cls.from_ext_fields, dict(cmd.ext_fields)))
                break
    return pairs


def test_typed_headers_with_mutated_values() -> None:
    pairs = _accepted_pairs()
    assert len(pairs) >= 10
    seeds = sorted({v.encode() for _, fields in pairs for v in fields.values()})
    turn = itertools.cycle(range(len(pairs)))

    def parse(data: bytes) -> None:
        parser, captured = pairs[next(turn)]
        fields = dict(captured)
        key = sorted(fields)[len(data) % len(fields)]
        if data[:1] == b"\x00":
            del fields[key]  # a missing required field
        else:
            fields[key] = data.decode("utf-8", "surrogateescape")
        parser(fields)

    _assert_clean(run_fuzz("typed header values", seeds, parse, (HeaderFieldError,)))
