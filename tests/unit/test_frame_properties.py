"""Property tests of the frame codec (STYLE.md §4.3 habit 2: the three codec tests).

What these tests pin:

* round trip for each header type: ``decode(encode(c)) == c`` (the one explicit loss:
  ROCKETMQ carries remark ``""`` as no remark) and ``encode(decode(b)) == b``;
* the h11 invariant: a stream of frames decodes to the same commands whole, one byte at a
  time, or in any chunking;
* hostile input (random bytes, mutated valid frames, random JSON / MSGPACK / ROCKETMQ
  headers) gives a list of commands or ``RemoteProtocolError``, never another exception,
  and a decoder that raised stays broken;
* the maximum frame length is enforced as soon as the 4 length bytes arrive;
* encoding something the format cannot carry raises ``LocalProtocolError``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.remoting.codes import LanguageCode, RequestCode, SerializeType
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import (
    DEFAULT_MAX_FRAME_LENGTH,
    FrameDecoder,
    decode_frame_payload,
    encode_frame,
    encode_json_header,
    json_header_by_encoder,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
TEXT = st.text(max_size=24)  # any unicode but lone surrogates, which UTF-8 cannot carry
EXT = st.dictionaries(TEXT, st.text(max_size=40), max_size=6)
SLOW = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def commands(draw: st.DrawFn, serialize_type: SerializeType | None = None) -> RemotingCommand:
    """A command the given header type can carry (code and version are shorts in ROCKETMQ)."""
    kind = serialize_type if serialize_type is not None else draw(st.sampled_from(SerializeType))
    number = INT16 if kind is SerializeType.ROCKETMQ else INT32
    return RemotingCommand(
        code=draw(number),
        opaque=draw(INT32),
        flag=draw(INT32),
        language=draw(st.sampled_from(LanguageCode)),
        version=draw(number),
        remark=draw(st.none() | TEXT),
        ext_fields=draw(EXT),
        body=draw(st.binary(max_size=64)),
        serialize_type=kind,
    )


def expected_after_round_trip(cmd: RemotingCommand) -> RemotingCommand:
    """ROCKETMQ writes remark length 0 for None and for "" alike; nothing else is lost."""
    if cmd.serialize_type is SerializeType.ROCKETMQ and cmd.remark == "":
        return dataclasses.replace(cmd, remark=None)
    return cmd


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({min(max(c, 0), len(data)) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def feed_pieces(pieces: list[bytes], max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> Any:
    """Feed pieces; return (commands, error). Only RemoteProtocolError may escape ``feed``.

    After an error the decoder must stay broken: later input, even a valid frame, raises.
    """
    decoder = FrameDecoder(max_frame_length)
    out: list[RemotingCommand] = []
    for piece in pieces:
        try:
            out += decoder.feed(piece)
        except RemoteProtocolError as exc:
            for later in (b"", VALID_FRAME):
                with pytest.raises(RemoteProtocolError):
                    decoder.feed(later)
            return out, exc
    for cmd in out:
        assert all(type(k) is str and type(v) is str for k, v in cmd.ext_fields.items())
    return out, None


VALID_FRAME = encode_frame(RemotingCommand(code=10, opaque=1))


def assert_same_outcome(data: bytes, pieces: list[bytes]) -> None:
    """Whole, byte-at-a-time and ``pieces`` agree on ``data``, valid or not.

    With valid input all three give the same commands. With an error all three raise,
    and ``feed`` returns nothing from the call that raised, so each chunking delivers a
    prefix of what byte-at-a-time delivers (every frame completed before the bad byte).
    """
    whole, whole_error = feed_pieces([data])
    single, single_error = feed_pieces([data[i : i + 1] for i in range(len(data))])
    chunked, chunked_error = feed_pieces(pieces)
    assert (whole_error is None) == (single_error is None) == (chunked_error is None)
    if whole_error is None:
        assert whole == single == chunked
    else:
        assert whole == []
        assert chunked == single[: len(chunked)]


def frame_with_header(header: bytes, serialize_type: int, body: bytes = b"") -> bytes:
    info = (serialize_type << 24) | len(header)
    return struct.pack(">iI", 4 + len(header) + len(body), info) + header + body


# ---------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("kind", list(SerializeType), ids=lambda t: t.name)
@given(data=st.data())
def test_round_trip_each_header_type(kind: SerializeType, data: st.DataObject) -> None:
    """decode(encode(c)) == c, and encode(decode(b)) == b for the bytes we produce."""
    cmd = data.draw(commands(kind))
    frame = encode_frame(cmd)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert frame[4] == kind
    [decoded] = FrameDecoder().feed(frame)
    assert decoded == expected_after_round_trip(cmd)
    assert encode_frame(decoded) == frame


@given(cmd=commands(SerializeType.ROCKETMQ))
@example(cmd=RemotingCommand(code=1, remark="", serialize_type=SerializeType.ROCKETMQ))
def test_rocketmq_empty_remark_decodes_as_none(cmd: RemotingCommand) -> None:
    """The one lossy ROCKETMQ case, pinned on its own: "" comes back as None."""
    [decoded] = FrameDecoder().feed(encode_frame(cmd))
    assert decoded.remark == (None if cmd.remark == "" else cmd.remark)


@given(cmd=commands(SerializeType.JSON))
def test_json_header_is_fastjson_shaped(cmd: RemotingCommand) -> None:
    """Sorted keys, no null remark, every extFields value a JSON string (spec §1.2, §9.1)."""
    obj = json.loads(encode_json_header(cmd))
    assert list(obj) == sorted(obj)
    assert ("remark" in obj) is (cmd.remark is not None)
    assert obj["language"] == cmd.language.name
    assert obj["serializeTypeCurrentRPC"] == "JSON"
    assert all(isinstance(v, str) for v in obj.get("extFields", {}).values())


@given(cmd=commands(SerializeType.JSON), enum_code=st.booleans())
def test_json_header_written_directly_equals_the_encoders(
    cmd: RemotingCommand, enum_code: bool
) -> None:
    """The direct writer is byte for byte ``json.JSONEncoder``'s text (the reference),
    including escapes, non-ASCII text and an IntEnum code."""
    if enum_code:
        cmd.code = RequestCode.SEND_MESSAGE
    try:
        expected: bytes | str = json_header_by_encoder(cmd)
    except LocalProtocolError as exc:
        expected = str(exc)
    try:
        got: bytes | str = encode_json_header(cmd)
    except LocalProtocolError as exc:
        got = str(exc)
    assert got == expected


@pytest.mark.parametrize("where", ["key", "value", "remark"])
def test_json_header_written_directly_refuses_lone_surrogates_alike(where: str) -> None:
    bad = "a\ud800b"
    cmd = RemotingCommand.request(
        RequestCode.SEND_MESSAGE,
        {bad: "v"} if where == "key" else {"k": bad if where == "value" else "v"},
    )
    if where == "remark":
        cmd.remark = bad
    with pytest.raises(LocalProtocolError) as direct:
        encode_json_header(cmd)
    with pytest.raises(LocalProtocolError) as reference:
        json_header_by_encoder(cmd)
    assert str(direct.value) == str(reference.value)


@SLOW
@given(cmds=st.lists(commands(), max_size=8), data=st.data())
def test_stream_whole_vs_byte_at_a_time_vs_chunks(
    cmds: list[RemotingCommand], data: st.DataObject
) -> None:
    """The h11 invariant: any chunking of a stream gives the same command list."""
    stream = b"".join(encode_frame(c) for c in cmds)
    expected = [expected_after_round_trip(c) for c in cmds]
    whole, error = feed_pieces([stream])
    assert error is None and whole == expected
    one_by_one, error = feed_pieces([stream[i : i + 1] for i in range(len(stream))])
    assert error is None and one_by_one == expected
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=20))
    chunked, error = feed_pieces(split(stream, cuts))
    assert error is None and chunked == expected


# --------------------------------------------------------------------------- hostile input


@SLOW
@given(blob=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=10))
@example(blob=b"\x00\x00\x00\x04\xff\x00\x00\x00", cuts=[])  # unknown serialize type
@example(blob=b"\x00\x00\x00\x05\x00\x00\x00\x09{", cuts=[])  # header past frame end
def test_random_bytes_give_commands_or_protocol_error(blob: bytes, cuts: list[int]) -> None:
    """Random bytes: commands or RemoteProtocolError, the same whole and byte by byte."""
    assert_same_outcome(blob, split(blob, cuts))


@SLOW
@given(
    cmds=st.lists(commands(), min_size=1, max_size=3),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1),
    cut=st.integers(0, 10_000),
    data=st.data(),
)
def test_mutated_valid_frames_give_commands_or_protocol_error(
    cmds: list[RemotingCommand],
    edits: list[tuple[int, int]],
    cut: int,
    data: st.DataObject,
) -> None:
    """Valid frames with bytes overwritten (then maybe truncated): never a stray exception."""
    stream = bytearray(b"".join(encode_frame(c) for c in cmds))
    for pos, value in edits:
        stream[pos % len(stream)] = value
    mutated = bytes(stream[: max(1, cut % (len(stream) + 1))])
    cuts = data.draw(st.lists(st.integers(0, len(mutated)), max_size=10))
    assert_same_outcome(mutated, split(mutated, cuts))


JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


@given(
    header=st.fixed_dictionaries(
        {},
        optional={
            "code": INT32 | JSON_VALUES,
            "language": st.sampled_from([m.name for m in LanguageCode]) | JSON_VALUES,
            "version": INT32 | JSON_VALUES,
            "opaque": INT32 | JSON_VALUES,
            "flag": INT32 | JSON_VALUES,
            "remark": TEXT | JSON_VALUES,
            "extFields": st.dictionaries(TEXT, JSON_VALUES, max_size=4) | JSON_VALUES,
        },
    ),
    trailing_newline=st.booleans(),
)
@example(header={"code": 10, "extFields": {"a": 1e400}}, trailing_newline=False)
@example(header={"code": True}, trailing_newline=False)
def test_random_json_headers(header: dict[str, Any], trailing_newline: bool) -> None:
    """Any JSON object as a header: one command with str extFields, or a protocol error."""
    text = json.dumps(header, ensure_ascii=False).encode() + (b"\n" if trailing_newline else b"")
    out, error = feed_pieces([frame_with_header(text, SerializeType.JSON)])
    assert len(out) == (0 if error else 1)
    if out and isinstance(header.get("extFields"), dict):
        assert set(out[0].ext_fields) <= set(header["extFields"])


MSGPACK_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4) | st.binary(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    items=st.lists(MSGPACK_VALUES, min_size=7, max_size=7) | MSGPACK_VALUES,
    ext=st.dictionaries(st.text(max_size=4) | st.binary(max_size=4), MSGPACK_VALUES, max_size=3),
)
@example(items=[10, 3, 409, 1, 0, None, None], ext={"a": b"\x00"})  # bin value
@example(items=[10, 3, 409, 1, 0, None, None], ext={"a": {b"k": 1}})  # bin key, nested
def test_random_msgpack_headers(items: Any, ext: dict[Any, Any]) -> None:
    """Any msgpack value as a MSGPACK header: one command or a protocol error."""
    if isinstance(items, list) and len(items) == 7 and items[6] is None:
        items[6] = ext
    header = msgpack.packb(items, use_bin_type=True)
    out, error = feed_pieces([frame_with_header(header, SerializeType.MSGPACK)])
    assert len(out) == (0 if error else 1)


@given(
    fixed=st.tuples(INT16, st.integers(-128, 127), INT16, INT32, INT32),
    remark=st.binary(max_size=8),
    remark_len=st.none() | INT32,
    entries=st.lists(
        st.tuples(
            st.binary(max_size=6), st.none() | INT16, st.binary(max_size=6), st.none() | INT32
        ),
        max_size=3,
    ),
    ext_len=st.none() | INT32,
    tail=st.binary(max_size=3),
)
def test_random_rocketmq_headers(
    fixed: tuple[int, int, int, int, int],
    remark: bytes,
    remark_len: int | None,
    entries: list[tuple[bytes, int | None, bytes, int | None]],
    ext_len: int | None,
    tail: bytes,
) -> None:
    """ROCKETMQ headers with lying lengths and non-UTF-8 text: command or protocol error."""
    ext = b"".join(
        struct.pack(">h", len(k) if kl is None else kl)
        + k
        + struct.pack(">i", len(v) if vl is None else vl)
        + v
        for k, kl, v, vl in entries
    )
    header = (
        struct.pack(">hbhii", *fixed)
        + struct.pack(">i", len(remark) if remark_len is None else remark_len)
        + remark
        + struct.pack(">i", len(ext) if ext_len is None else ext_len)
        + ext
        + tail
    )
    out, error = feed_pieces([frame_with_header(header, SerializeType.ROCKETMQ)])
    assert len(out) == (0 if error else 1)
    if out:
        assert (out[0].code, out[0].version, out[0].opaque, out[0].flag) == (
            fixed[0],
            fixed[2],
            fixed[3],
            fixed[4],
        )
    honest = remark_len is None and ext_len is None and not tail
    honest = honest and all(kl is None and vl is None for _, kl, _, vl in entries)
    if honest and _is_utf8(remark, *(b for k, _, v, _ in entries for b in (k, v))):
        # Honest lengths and valid text must decode, and to exactly what was written.
        assert error is None
        assert out[0].remark == (remark.decode() or None)
        assert out[0].ext_fields == {k.decode(): v.decode() for k, _, v, _ in entries}


def _is_utf8(*texts: bytes) -> bool:
    try:
        for text in texts:
            text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# ----------------------------------------------------------------------- frame size limit


@pytest.mark.parametrize(
    "prefix", [b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00"], ids=["2GiB-1", "2GiB"]
)
def test_huge_length_fails_with_only_the_length_field(prefix: bytes) -> None:
    """A 2 GiB length is refused when its 4 bytes arrive; nothing waits for the rest."""
    decoder = FrameDecoder()
    with pytest.raises(RemoteProtocolError):
        decoder.feed(prefix)
    with pytest.raises(RemoteProtocolError):
        decoder.feed(VALID_FRAME)  # broken for good: frame boundaries are lost


@given(
    max_len=st.integers(1024, 1 << 24), over=st.integers(1, 2**31 - 1), split_at=st.integers(1, 3)
)
def test_max_frame_length_checked_on_the_length_field(
    max_len: int, over: int, split_at: int
) -> None:
    """Length + 4 > max raises as soon as 4 bytes are in, even if they come in pieces."""
    length = min(max_len - 4 + over, 2**31 - 1)
    prefix = struct.pack(">i", length)
    decoder = FrameDecoder(max_len)
    assert decoder.feed(prefix[:split_at]) == []
    with pytest.raises(RemoteProtocolError):
        decoder.feed(prefix[split_at:])
    at_limit = FrameDecoder(max_len)
    assert at_limit.feed(struct.pack(">i", max_len - 4)) == []
    assert at_limit.buffered == 4


@pytest.mark.parametrize("length", [-1, 0, 3])
def test_length_below_header_info_is_refused(length: int) -> None:
    """A frame needs at least its 4-byte header-info field."""
    with pytest.raises(RemoteProtocolError):
        FrameDecoder().feed(struct.pack(">i", length))


@pytest.mark.parametrize("kind", list(SerializeType), ids=lambda t: t.name)
def test_frame_exactly_at_limit_decodes_and_one_over_is_refused(kind: SerializeType) -> None:
    """Max frame length counts the length field; == max passes both ways, max + 1 fails."""
    max_len = 1024
    cmd = RemotingCommand(code=1, serialize_type=kind)
    head = len(encode_frame(cmd))
    cmd.body = b"x" * (max_len - head)
    frame = encode_frame(cmd, max_len)
    assert len(frame) == max_len
    assert FrameDecoder(max_len).feed(frame) == [cmd]
    cmd.body = b"x" * (max_len - head + 1)
    with pytest.raises(LocalProtocolError):
        encode_frame(cmd, max_len)
    with pytest.raises(RemoteProtocolError):
        FrameDecoder(max_len).feed(encode_frame(cmd, max_len + 1))


# ----------------------------------------------------------------------- encode refusals


@given(code=st.integers(-(2**31), 2**31 - 1).filter(lambda n: not -(2**15) <= n < 2**15))
def test_rocketmq_code_and_version_must_be_shorts(code: int) -> None:
    """RocketMQSerializable writes code and version as shorts; out of range is local error."""
    with pytest.raises(LocalProtocolError):
        encode_frame(RemotingCommand(code=code, serialize_type=SerializeType.ROCKETMQ))
    with pytest.raises(LocalProtocolError):
        encode_frame(RemotingCommand(code=1, version=code, serialize_type=SerializeType.ROCKETMQ))
    # JSON and MSGPACK carry int32, so the same code is fine there.
    for kind in (SerializeType.JSON, SerializeType.MSGPACK):
        [back] = FrameDecoder().feed(encode_frame(RemotingCommand(code=code, serialize_type=kind)))
        assert back.code == code


@pytest.mark.parametrize("kind", list(SerializeType), ids=lambda t: t.name)
@pytest.mark.parametrize("field", ["code", "opaque", "flag", "version"])
@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_int32_fields_out_of_range(kind: SerializeType, field: str, value: int) -> None:
    """No header type carries more than an int32 in code, opaque, flag or version."""
    with pytest.raises(LocalProtocolError):
        encode_frame(RemotingCommand(**{"code": 1, "serialize_type": kind, field: value}))


@pytest.mark.parametrize("kind", list(SerializeType), ids=lambda t: t.name)
@pytest.mark.parametrize("ext", [{"a": 1}, {"a": None}, {"a": True}, {"a": b"x"}, {1: "a"}])
def test_ext_fields_must_be_str_to_str(kind: SerializeType, ext: dict[Any, Any]) -> None:
    """Replies must carry string extFields (the C++ client reads only strings, spec §2.6)."""
    with pytest.raises(LocalProtocolError):
        encode_frame(RemotingCommand(code=1, ext_fields=ext, serialize_type=kind))


@pytest.mark.parametrize("kind", list(SerializeType), ids=lambda t: t.name)
@pytest.mark.parametrize("where", ["remark", "key", "value"])
def test_unencodable_text_is_a_local_error(kind: SerializeType, where: str) -> None:
    """A lone surrogate cannot be UTF-8: a LocalProtocolError, not a UnicodeEncodeError."""
    bad = "x\ud800"
    cmd = RemotingCommand(code=1, serialize_type=kind)
    if where == "remark":
        cmd.remark = bad
    else:
        cmd.ext_fields = {bad: "v"} if where == "key" else {"k": bad}
    with pytest.raises(LocalProtocolError):
        encode_frame(cmd)


def test_default_max_frame_is_16_mib() -> None:
    """RocketMQ's frameMaxLength default: 16 MiB including the length field."""
    cmd = RemotingCommand(code=1)
    cmd.body = bytes(DEFAULT_MAX_FRAME_LENGTH - len(encode_frame(cmd)) + 1)
    with pytest.raises(LocalProtocolError):
        encode_frame(cmd)


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00\x00", b"\x00\x00\x00\x05{}", b"\x03\x00\x00\x00", b"\x00\x00\x00\x02[]"],
    ids=["empty", "short-info", "header-past-end", "type-3", "json-array"],
)
def test_decode_frame_payload_refuses_malformed(payload: bytes) -> None:
    """The payload decoder (used on whole frames) raises only RemoteProtocolError."""
    with pytest.raises(RemoteProtocolError):
        decode_frame_payload(payload)
