"""The frame codec against the bytes stock clients really send (``tests/vectors``).

What these tests pin (``specs/remoting.md`` §1, §2; ``tests/vectors/README.md``):

* every captured frame, client and test double, decodes to one command whose header fields
  equal the captured ``header`` after extFields normalisation (numbers become decimal text,
  booleans ``"true"``/``"false"``, strings stay as sent), however the bytes are chunked;
* ``decode(encode(decode(x))) == decode(x)`` with the header re-encoded as JSON, ROCKETMQ
  and MSGPACK;
* one connection's client frames, concatenated in ``seq`` order, are one stream that
  decodes to the same commands whole, one byte at a time and in random chunks;
* the quirks the README lists: C++'s trailing newline, mixed value types, ali-ons
  booleans, C++ ``"0"``/``"1"`` strings.

No sockets and no event loop: the codec is sans-IO.
"""

from __future__ import annotations

import dataclasses
import json
import random
import struct
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.remoting import frame as frame_module
from aiorocketmq.remoting.codes import LanguageCode, RequestCode, SerializeType
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import FrameDecoder, decode_frame_payload, encode_frame
from tests.support.kernels import IMPLEMENTATIONS, use_frame_kernel
from tests.support.vectors import load_jsonl


@pytest.fixture(autouse=True, params=IMPLEMENTATIONS)
def _frame_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs on the MSGPACK C kernel and on the pure-Python reference."""
    use_frame_kernel(request.param, monkeypatch)


# ---------------------------------------------------------------------------- vectors


VECTOR_FILES = ("cpp_client.jsonl", "alions_client.jsonl")


LINES: list[dict[str, Any]] = [
    {**line, "file": name} for name in VECTOR_FILES for line in load_jsonl(name)
]


def _line_id(line: dict[str, Any]) -> str:
    return f"{line['file'].split('_')[0]}-{line['scenario']}-{line['seq']}-{line['origin']}"


def _find(predicate: Any) -> list[dict[str, Any]]:
    found = [line for line in LINES if predicate(line)]
    assert found, "the vectors no longer contain the frame this test is about"
    return found


def _normalise(value: object) -> str:
    """The extFields rule of specs/remoting.md §2.6, written independently of frame.py."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    assert isinstance(value, str), f"vectors hold only str/int/bool ext values, got {value!r}"
    return value


def _chunkings(data: bytes, rng: random.Random, count: int = 4) -> Iterator[list[bytes]]:
    """Random splits of ``data`` into pieces of 1..97 bytes (a few different ones)."""
    for _ in range(count):
        pieces, pos = [], 0
        while pos < len(data):
            size = rng.randint(1, 97)
            pieces.append(data[pos : pos + size])
            pos += size
        yield pieces


def feed_all(pieces: list[bytes] | Iterator[bytes]) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    for piece in pieces:
        out += decoder.feed(piece)
    assert decoder.buffered == 0, "bytes left over after the last whole frame"
    return out


def byte_at_a_time(data: bytes) -> list[RemotingCommand]:
    return feed_all(data[i : i + 1] for i in range(len(data)))


def reencoded(cmd: RemotingCommand, serialize_type: SerializeType) -> RemotingCommand:
    """What ``decode(encode(cmd as serialize_type))`` must give.

    The one lossy case is explicit: the ROCKETMQ header writes remark length 0 both for
    no remark and for ``""`` (RocketMQSerializable), so ``""`` comes back as None.
    """
    expected = dataclasses.replace(cmd, serialize_type=serialize_type)
    if serialize_type is SerializeType.ROCKETMQ and cmd.remark == "":
        expected.remark = None
    return expected


# ---------------------------------------------------------------- every captured frame


@pytest.mark.parametrize("line", LINES, ids=_line_id)
def test_vector_frame_decodes_to_its_header(line: dict[str, Any]) -> None:
    """Each captured frame is one command whose fields equal the captured header."""
    frame = bytes.fromhex(line["frame_hex"])
    (length, info) = struct.unpack_from(">iI", frame)
    assert length == len(frame) - 4
    assert info >> 24 == line["serialize_type"] == 0

    [cmd] = feed_all([frame])
    header = line["header"]
    assert cmd.serialize_type is SerializeType.JSON
    assert cmd.code == header["code"] == line["code"]
    assert cmd.opaque == header["opaque"] == line["opaque"]
    assert cmd.flag == header["flag"]
    assert cmd.is_response is line["is_response"]
    assert cmd.language is LanguageCode[header["language"]]
    assert cmd.version == header["version"]
    assert cmd.remark == header.get("remark")
    raw_ext = header.get("extFields") or {}
    assert cmd.ext_fields == {k: _normalise(v) for k, v in raw_ext.items()}
    assert all(type(v) is str for v in cmd.ext_fields.values())
    assert len(cmd.body) == line["body_len"]
    header_len = info & 0xFFFFFF
    assert bytes(cmd.body) == frame[8 + header_len :]


@pytest.fixture(params=["default", "tiny"])
def large_frame(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run with the large-frame path only for big frames, and for nearly every frame."""
    if request.param == "tiny":
        monkeypatch.setattr(frame_module, "LARGE_FRAME", 16)


@pytest.mark.usefixtures("large_frame")
@pytest.mark.parametrize("line", LINES, ids=_line_id)
def test_vector_frame_same_command_for_any_chunking(line: dict[str, Any]) -> None:
    """Whole, one byte at a time, and random chunks all give the same single command."""
    frame = bytes.fromhex(line["frame_hex"])
    whole = feed_all([frame])
    assert len(whole) == 1
    assert byte_at_a_time(frame) == whole
    rng = random.Random(f"{line['file']}:{line['scenario']}:{line['seq']}")
    for pieces in _chunkings(frame, rng):
        assert feed_all(pieces) == whole
    # A memoryview input (how a gather-write peer's bytes may arrive) changes nothing.
    assert FrameDecoder().feed(memoryview(frame)) == whole


@pytest.mark.parametrize("serialize_type", list(SerializeType), ids=lambda t: t.name)
@pytest.mark.parametrize("line", LINES, ids=_line_id)
def test_vector_frame_reencode_round_trip(
    line: dict[str, Any], serialize_type: SerializeType
) -> None:
    """decode(encode(decode(x))) == decode(x), re-encoded in each header type."""
    [cmd] = feed_all([bytes.fromhex(line["frame_hex"])])
    expected = reencoded(cmd, serialize_type)
    again = dataclasses.replace(cmd, serialize_type=serialize_type)
    frame = encode_frame(again)
    assert frame[4] == serialize_type  # the type byte is the high byte of header info
    assert feed_all([frame]) == [expected]
    # And the encoding is stable: encode(decode(encode(c))) == encode(c).
    assert encode_frame(expected) == frame


# ------------------------------------------------------------------ connection streams


def _streams() -> dict[str, list[dict[str, Any]]]:
    streams: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in LINES:
        if line["origin"] == "client":
            streams[f"{line['scenario']}-conn{line['conn']}"].append(line)
    for frames in streams.values():
        frames.sort(key=lambda line: line["seq"])
    return dict(streams)


STREAMS = _streams()


@pytest.mark.usefixtures("large_frame")
@pytest.mark.parametrize("name", sorted(STREAMS))
def test_client_stream_decodes_the_same_however_chunked(name: str) -> None:
    """A connection's client frames joined in seq order decode frame by frame, any chunking."""
    frames = [bytes.fromhex(line["frame_hex"]) for line in STREAMS[name]]
    expected = [decode_frame_payload(frame[4:]) for frame in frames]
    stream = b"".join(frames)
    assert feed_all([stream]) == expected
    assert byte_at_a_time(stream) == expected
    for pieces in _chunkings(stream, random.Random(name)):
        assert feed_all(pieces) == expected
    # Frame boundaries exactly on chunk boundaries are the other classic framing bug.
    assert feed_all(frames) == expected
    assert [c.opaque for c in expected] == [line["opaque"] for line in STREAMS[name]]


def test_a_large_frame_is_received_into_its_own_body_buffer() -> None:
    """A 2 MiB reply read in 256 KiB pieces with a small frame behind it in the last one."""
    body = bytes(range(256)) * 8192
    big = RemotingCommand.request(RequestCode.PULL_MESSAGE, {"k": "v"}, body)
    small = RemotingCommand.request(RequestCode.HEART_BEAT, {}, b"tail")
    stream = encode_frame(big) + encode_frame(small)
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    for at in range(0, len(stream), 256 * 1024):
        piece = stream[at : at + 256 * 1024]
        got += decoder.feed(piece)
        if not got:
            assert decoder.buffered == at + len(piece)
    assert decoder.buffered == 0
    assert got == [decode_frame_payload(f[4:]) for f in (encode_frame(big), encode_frame(small))]
    assert type(got[0].body) is bytearray and got[0].body == body  # no copy out of a buffer
    assert got[0].ext_fields == {"k": "v"} and got[1].body == b"tail"


def test_a_large_frame_with_a_bad_header_breaks_the_stream() -> None:
    decoder = FrameDecoder()
    head = struct.pack(">iI", 200_000, (7 << 24) | 10)  # serialize type 7 does not exist
    with pytest.raises(RemoteProtocolError, match="serialize type"):
        decoder.feed(head + bytes(1000))
    with pytest.raises(RemoteProtocolError):
        decoder.feed(b"more")


def test_streams_cover_both_clients() -> None:
    """Guard: the stream test above really sees multi-frame C++ and ali-ons connections."""
    clients = {STREAMS[name][0]["client"] for name in STREAMS if len(STREAMS[name]) > 1}
    assert clients == {"cpp-1.2", "ali-ons-3.12"}


# ------------------------------------------------------------------------------ quirks


def _decode_line(line: dict[str, Any]) -> tuple[RemotingCommand, bytes]:
    frame = bytes.fromhex(line["frame_hex"])
    header_len = struct.unpack_from(">I", frame, 4)[0] & 0xFFFFFF
    [cmd] = feed_all([frame])
    return cmd, frame[8 : 8 + header_len]


def test_cpp_header_trailing_newline_is_counted_and_accepted() -> None:
    """C++ ends every header with a newline counted in the header length (README quirk 2)."""
    cpp = _find(lambda ln: ln["client"] == "cpp-1.2" and ln["origin"] == "client")
    assert len(cpp) == 177
    for line in cpp:
        cmd, header = _decode_line(line)
        assert header.endswith(b"}\n")
        assert cmd.code == line["code"]
    # The same header without its newline decodes to the same command.
    cmd, header = _decode_line(cpp[0])
    trimmed = header[:-1]
    frame = struct.pack(">iI", 4 + len(trimmed), len(trimmed)) + trimmed
    assert feed_all([frame]) == [cmd]


def test_alions_header_has_no_newline_and_no_remark() -> None:
    """ali-ons writes no remark and no newline: remark decodes to None, not ""."""
    for line in _find(lambda ln: ln["client"] == "ali-ons-3.12" and ln["origin"] == "client"):
        cmd, header = _decode_line(line)
        assert header.endswith(b"}")
        assert cmd.remark is None


def test_cpp_mixed_type_ext_fields_become_strings() -> None:
    """C++ SEND_MESSAGE mixes numbers (queueId, sysFlag) and strings (bornTimestamp)."""
    line = _find(lambda ln: ln["client"] == "cpp-1.2" and ln["code"] == 10)[0]
    raw = line["header"]["extFields"]
    assert isinstance(raw["queueId"], int) and isinstance(raw["sysFlag"], int)
    assert isinstance(raw["bornTimestamp"], str) and isinstance(raw["reconsumeTimes"], str)
    cmd, _ = _decode_line(line)
    assert cmd.ext_fields["queueId"] == str(raw["queueId"])
    assert cmd.ext_fields["sysFlag"] == str(raw["sysFlag"])
    assert cmd.ext_fields["defaultTopicQueueNums"] == "4"
    assert cmd.ext_fields["bornTimestamp"] == raw["bornTimestamp"]
    # PULL_MESSAGE: numbers and strings inside one header too.
    pull = _find(lambda ln: ln["client"] == "cpp-1.2" and ln["code"] == 11)[0]
    cmd, _ = _decode_line(pull)
    assert cmd.ext_fields["maxMsgNums"] == str(pull["header"]["extFields"]["maxMsgNums"])
    assert cmd.ext_fields["queueOffset"] == pull["header"]["extFields"]["queueOffset"]


def test_alions_booleans_become_true_false_text() -> None:
    """ali-ons sends JSON booleans; they become "true"/"false", never Python's "False"."""
    send = _find(lambda ln: ln["client"] == "ali-ons-3.12" and ln["code"] == 310)
    for line in send:
        assert line["header"]["extFields"]["k"] is False
        cmd, _ = _decode_line(line)
        assert cmd.ext_fields["k"] == "false"
        assert cmd.ext_fields["e"] == str(line["header"]["extFields"]["e"])  # a JSON number
    back = _find(lambda ln: ln["client"] == "ali-ons-3.12" and ln["code"] == 36)[0]
    cmd, _ = _decode_line(back)
    assert cmd.ext_fields["unitMode"] == "false"
    assert cmd.ext_fields["offset"] == str(back["header"]["extFields"]["offset"])
    # And a JSON true, built from the same header, becomes "true".
    header = dict(back["header"], extFields=dict(back["header"]["extFields"], unitMode=True))
    text = json.dumps(header).encode()
    [flipped] = feed_all([struct.pack(">iI", 4 + len(text), len(text)) + text])
    assert flipped.ext_fields["unitMode"] == "true"


def test_cpp_zero_one_strings_stay_as_sent() -> None:
    """C++ 1.2 sends booleans as "0"/"1"; the codec keeps the text (handlers interpret it)."""
    sends = _find(lambda ln: ln["client"] == "cpp-1.2" and ln["code"] == 10)
    batches = {_decode_line(line)[0].ext_fields["batch"] for line in sends}
    assert batches == {"0", "1"}
    for line in sends:
        cmd, _ = _decode_line(line)
        assert cmd.ext_fields["unitMode"] == "0"


def test_alions_commit_offset_minus_one_is_kept() -> None:
    """ali-ons commits offset -1 as a JSON number; it must survive as the text "-1"."""
    commits = _find(
        lambda ln: (
            ln["client"] == "ali-ons-3.12"
            and ln["code"] == 15
            and ln["header"]["extFields"]["commitOffset"] == -1
        )
    )
    cmd, _ = _decode_line(commits[0])
    assert cmd.ext_fields["commitOffset"] == "-1"


def test_test_double_oneway_requests_carry_flag_two() -> None:
    """The test double's NOTIFY_CONSUMER_IDS_CHANGED has flag 2: a oneway request."""
    notes = _find(lambda ln: ln["origin"] == "test-double" and ln["code"] == 40)
    for line in notes:
        cmd, _ = _decode_line(line)
        assert cmd.is_oneway and not cmd.is_response


def test_no_client_frame_sets_the_oneway_bit() -> None:
    """README quirk 5: stock clients never put the oneway bit on the wire."""
    for line in _find(lambda ln: ln["origin"] == "client"):
        cmd, _ = _decode_line(line)
        assert not cmd.is_oneway and not cmd.is_response


# ---------------------------------------------------------------------------- requests


def test_a_request_is_the_command_its_fields_make() -> None:
    """``RemotingCommand.request`` (built in place by the kernel, or by ``__init__``)
    gives the dataclass its fields make, every field set, the ext map its own."""
    ext = {"a": "1"}
    made = RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, ext, b"body", serialize_type=SerializeType.MSGPACK
    )
    assert made == RemotingCommand(
        RequestCode.SEND_MESSAGE_V2, 0, 0, LanguageCode.PYTHON, made.version, None,
        {"a": "1"}, b"body", SerializeType.MSGPACK, None,
    )  # fmt: skip
    assert made.ext_fields is ext and made.body_parts is None
    bare = RemotingCommand.request(RequestCode.HEART_BEAT)
    assert bare.ext_fields == {} and bare.body == b"" and bare.opaque == 0
    assert bare.ext_fields is not RemotingCommand.request(RequestCode.HEART_BEAT).ext_fields
    assert bare.serialize_type is SerializeType.JSON and bare.language is LanguageCode.PYTHON


def test_a_subclass_s_request_runs_its_own_init() -> None:
    """Only ``RemotingCommand`` itself is built in place: a subclass's ``__init__`` runs."""

    class Traced(RemotingCommand):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.remark = "traced"

    made = Traced.request(RequestCode.HEART_BEAT, {"k": "v"})
    assert type(made) is Traced and made.remark == "traced" and made.ext_fields == {"k": "v"}
