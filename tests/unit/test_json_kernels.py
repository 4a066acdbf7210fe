"""The JSON C kernels against the reference codec in ``frame.py``.

The decoder must give what ``py_decode_json_header`` gives, or decline (None), and
never accept what the reference refuses; the encoder must write the bytes
``py_encode_frame_head`` writes, or decline. Every JSON frame captured from the stock
clients (C++ and Node) must be taken by the kernels, not left to the reference.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.remoting import frame as frame_module
from aiorocketmq.remoting.codes import LanguageCode, SerializeType
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import (
    FrameDecoder,
    decode_frame_payload,
    encode_frame,
    py_decode_json_header,
    py_encode_frame_head,
)
from aiorocketmq.remoting.header_values import LANGUAGE_BY_NAME, LANGUAGE_BY_VALUE
from tests.support.kernels import kernel_or_skip

pytestmark = pytest.mark.timeout(120)

_VECTORS = Path(__file__).parents[1] / "vectors"
_MAX = 16 * 1024 * 1024

_INT32 = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([0, 9, 10, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 10**18, 10**19]),
)
_TEXT = st.one_of(
    st.text(max_size=30),
    st.text(alphabet='a\x00\x01\x1f\x7f"\\/\n\t\u00e9\u4e2d\ud800\udc00\U0001f600', max_size=9),
)
_SCALAR = st.one_of(
    _TEXT, st.integers(-(2**70), 2**70), st.booleans(), st.none(), st.floats(allow_nan=False)
)
_EXT_VALUE = _SCALAR | st.lists(_SCALAR, max_size=2) | st.dictionaries(_TEXT, _SCALAR, max_size=2)
_LANGUAGE = st.sampled_from([*LANGUAGE_BY_NAME, "NOPE", 0, 11, 99, None, True, 1.5])


@pytest.fixture(scope="module")
def kernel() -> Any:
    return kernel_or_skip("aiorocketmq.remoting._json_kernels")


def _decode(kernel: Any, data: bytes) -> Any:
    return kernel.decode_json_header(
        data, LANGUAGE_BY_VALUE, LANGUAGE_BY_NAME, LanguageCode.OTHER, LanguageCode.JAVA
    )


def _reference(data: bytes) -> object:
    try:
        return py_decode_json_header(data)
    except RemoteProtocolError:
        return RemoteProtocolError


def _stock_frames() -> list[bytes]:
    frames = []
    for name in ("cpp_client.jsonl", "alions_client.jsonl"):
        for line in (_VECTORS / name).read_text().splitlines():
            row = json.loads(line)
            if row["serialize_type"] == SerializeType.JSON:
                frames.append(bytes.fromhex(row["frame_hex"]))
    return frames


def _header(frame: bytes) -> bytes:
    (info,) = struct.unpack_from(">I", frame, 4)
    return frame[8 : 8 + (info & 0xFFFFFF)]


def test_every_stock_client_frame_is_taken_and_read_as_the_reference(kernel: Any) -> None:
    frames = _stock_frames()
    assert len(frames) > 100
    codes = set()
    for frame in frames:
        header = _header(frame)
        got = _decode(kernel, header)
        assert got is not None, header
        assert got == py_decode_json_header(header)
        codes.add(got[0])
        (cmd,), pos = kernel.split_json(
            frame, 0, _MAX, RemotingCommand, LANGUAGE_BY_VALUE, LANGUAGE_BY_NAME,
            LanguageCode.OTHER, LanguageCode.JAVA, SerializeType.JSON,
        )  # fmt: skip
        assert pos == len(frame) and cmd == decode_frame_payload(frame[4:])
    assert {10, 11, 34} <= codes  # sends, pulls and heartbeats among them


def _header_object(draw: st.DrawFn) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, values in (
        ("code", _INT32), ("opaque", _INT32), ("flag", _INT32), ("version", _INT32),
        ("language", _LANGUAGE), ("remark", st.none() | _TEXT | st.integers()),
        ("extFields", st.none() | st.dictionaries(_TEXT, _EXT_VALUE, max_size=8)),
        ("serializeTypeCurrentRPC", st.sampled_from(["JSON", 0, None, [1]])),
    ):  # fmt: skip
        if draw(st.integers(0, 9)) > 0:  # each key absent now and then
            obj[key] = draw(values)
    if draw(st.booleans()):
        obj["code"] = draw(st.text(alphabet="0123456789 -", max_size=4))  # a string code
    return obj


@st.composite
def _json_headers(draw: st.DrawFn) -> bytes:
    obj = _header_object(draw)
    keys = list(obj)
    order = draw(st.permutations(keys))
    text = json.dumps(
        {k: obj[k] for k in order},
        ensure_ascii=draw(st.booleans()),
        separators=draw(st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", "\t:\r")])),
    )
    text = draw(st.sampled_from(["", " ", "\n"])) + text + draw(st.sampled_from(["", "\n", "x"]))
    return text.encode("utf-8", "surrogatepass")


@given(data=_json_headers())
@settings(max_examples=600, deadline=None)
def test_decoder_agrees_with_the_reference_or_declines(kernel: Any, data: bytes) -> None:
    got = _decode(kernel, data)
    ref = _reference(data)
    if got is None:
        return
    assert ref is not RemoteProtocolError, data
    assert got == ref


@given(
    code=st.integers(-(2**31), 2**31 - 1),
    opaque=st.integers(0, 2**31 - 1),
    language=st.sampled_from(list(LANGUAGE_BY_NAME)),
    remark=st.none() | st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=20),
    ext=st.dictionaries(
        st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
        st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40)
        | st.integers(-(10**17), 10**17) | st.booleans() | st.none(),
        max_size=12,
    ),
)  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_decoder_takes_every_usual_header(
    kernel: Any, code: int, opaque: int, language: str, remark: str | None, ext: dict[str, Any]
) -> None:
    """What stock clients send: ints, names, strings with any escapes, numbers and
    booleans in extFields. The kernel must take it, not only agree."""
    data = json.dumps(
        {"code": code, "extFields": ext, "flag": 0, "language": language, "opaque": opaque,
         "remark": remark, "version": 63},
        ensure_ascii=True,
    ).encode()  # fmt: skip
    got = _decode(kernel, data)
    assert got is not None
    assert got == py_decode_json_header(data)


@given(data=st.binary(max_size=64))
@settings(max_examples=500, deadline=None)
def test_decoder_on_random_bytes_agrees_or_declines(kernel: Any, data: bytes) -> None:
    got = _decode(kernel, b'{"code":1,' + data)
    if got is not None:
        assert got == _reference(b'{"code":1,' + data)


def test_decoder_declines_what_it_leaves_to_the_reference(kernel: Any) -> None:
    assert _decode(kernel, b'{"code":1}') == (1, 0, 0, LanguageCode.JAVA, 0, None, {})
    for odd in (
        b'{"code":"10"}',  # a numeric string: the reference coerces it
        b'{"code":1.0}',
        b'{"code":1,"code":2}',  # a duplicate key
        b'{"code":1,"extFields":{"a":"x","a":null}}',
        b'{"code":1,"extFields":{"a":1.5}}',
        b'{"code":1,"extFields":{"a":[1]}}',
        b'{"code":1,"extFields":{"a":"\\ud83d"}}',  # a lone escaped surrogate
        b'{"code":1,"remark":"a\x01"}',  # a raw control character: refused by the reference
        b'{"code":1,"remark":"\xff"}',  # not UTF-8
        b'{"code":1,"other":{}}',
        b'{"code":1} x',
        b'{"code":2147483648}',
        b"{}",
        b"\xef\xbb\xbf{}",
    ):
        assert _decode(kernel, odd) is None, odd
    assert _decode(kernel, b'{"code":1,"extFields":{"a":null,"b":-0,"c":true}}')[6] == {
        "b": "0",
        "c": "true",
    }
    pair = _decode(kernel, b'{"code":1,"remark":"\\ud83d\\ude00\\u00e9"}')
    assert pair is not None and pair[5] == "\U0001f600\u00e9"


# ------------------------------------------------------------------ encode


def _json_command(**fields: Any) -> RemotingCommand:
    return RemotingCommand(serialize_type=SerializeType.JSON, **fields)


def _encode(kernel: Any, cmd: RemotingCommand, body_length: int = 0, max_len: int = _MAX) -> Any:
    return kernel.encode_json_head(
        cmd.code, cmd.language.name, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
        cmd.ext_fields, body_length, max_len,
    )  # fmt: skip


@given(
    code=_INT32, version=_INT32, opaque=_INT32, flag=_INT32,
    language=st.sampled_from(list(LanguageCode)),
    remark=st.none() | _TEXT,
    ext=st.dictionaries(_TEXT, _TEXT, max_size=10),
    body_length=st.integers(0, 2000),
)  # fmt: skip
@settings(max_examples=400, deadline=None)
def test_encoded_head_is_the_references_bytes(
    kernel: Any, code: int, version: int, opaque: int, flag: int, language: LanguageCode,
    remark: str | None, ext: dict[str, str], body_length: int,
) -> None:  # fmt: skip
    cmd = _json_command(
        code=code, version=version, opaque=opaque, flag=flag, language=language,
        remark=remark, ext_fields=ext, body=b"x" * body_length,
    )  # fmt: skip
    got = _encode(kernel, cmd, body_length)
    try:
        ref = py_encode_frame_head(cmd, _MAX)
    except LocalProtocolError:
        assert got is None
        return
    if got is not None:
        assert got == ref
    surrogate = any("\ud800" <= ch <= "\udfff" for text in (remark or "", *ext, *ext.values())
                    for ch in text)  # fmt: skip
    if not surrogate and all(-(2**31) <= x < 2**31 for x in (code, version, opaque, flag)):
        assert got == ref  # the usual command is the kernel's, not declined


def test_encoder_declines_odd_commands(kernel: Any) -> None:
    assert _encode(kernel, _json_command(code=0, remark="ok", ext_fields={"a": "b"})) is not None
    assert _encode(kernel, _json_command(code=0, ext_fields={"a": 1})) is None  # type: ignore[dict-item]
    assert _encode(kernel, _json_command(code=True)) is None
    assert _encode(kernel, _json_command(code=0, remark="\ud800")) is None
    assert _encode(kernel, _json_command(code=0), body_length=100, max_len=110) is None


# ------------------------------------------------------------------ streams


def test_a_json_stream_is_split_by_the_kernels_as_by_the_reference(kernel: Any) -> None:
    frames = _stock_frames()[:40]
    ours = encode_frame(RemotingCommand(code=310, opaque=7, serialize_type=SerializeType.MSGPACK))
    odd = struct.pack(">iI", 4 + 2, 0 << 24 | 2) + b"[]"  # a JSON header the reference refuses
    stream = b"".join(frames[:20]) + ours + b"".join(frames[20:])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame_module, "_JSON_KERNEL", kernel)
        fast = FrameDecoder().feed(stream)
        patch.setattr(frame_module, "_JSON_KERNEL", None)
        patch.setattr(frame_module, "_KERNEL", None)
        assert fast == FrameDecoder().feed(stream)
        assert len(fast) == 41
    with pytest.raises(RemoteProtocolError, match="not an object"):
        FrameDecoder().feed(frames[0] + odd)
