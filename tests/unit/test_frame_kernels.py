"""The MSGPACK C kernels against msgpack itself and against the reference decoder.

The encoder must write what ``msgpack.packb(..., use_bin_type=True)`` writes, byte
for byte, or decline (None) and leave the command to the reference; the decoder must
give what the reference gives, or decline, and never accept what it refuses.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.remoting import frame as frame_module
from aiorocketmq.remoting.codes import LanguageCode, SerializeType
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import (
    FrameDecoder,
    decode_frame_payload,
    encode_frame,
    py_decode_msgpack_header,
    py_encode_frame_head,
)
from aiorocketmq.remoting.header_values import LANGUAGE_BY_VALUE
from tests.support.kernels import kernel_or_skip

pytestmark = pytest.mark.timeout(120)

_INT32 = st.one_of(
    st.integers(-(2**31), 2**31 - 1),
    st.sampled_from([0, 127, 128, 255, 256, 65535, 65536, -1, -32, -33, -128, -129, -32768,
                     -32769, 2**31 - 1, -(2**31)]),
)  # fmt: skip
_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="ab\u00e9\u4e2d", min_size=28, max_size=300),
    st.sampled_from(["x" * 31, "x" * 32, "x" * 255, "x" * 256, "x" * 65535, "x" * 65536]),
)


@pytest.fixture(scope="module")
def kernel() -> Any:
    return kernel_or_skip("aiorocketmq.remoting._frame_kernels")


@pytest.fixture(scope="module")
def json_kernel() -> Any:
    return kernel_or_skip("aiorocketmq.remoting._json_kernels")


def _command(
    code: int, version: int, opaque: int, flag: int, remark: str | None, ext: dict[str, str]
) -> RemotingCommand:
    return RemotingCommand(
        code, opaque, flag, LanguageCode.PYTHON, version, remark, ext,
        serialize_type=SerializeType.MSGPACK,
    )  # fmt: skip


@given(
    code=_INT32, version=_INT32, opaque=_INT32, flag=_INT32,
    remark=st.none() | _TEXT,
    ext=st.dictionaries(_TEXT, _TEXT, max_size=20),
    body_length=st.integers(0, 2000),
)  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_encoded_head_is_msgpacks_bytes(
    kernel: Any,
    code: int, version: int, opaque: int, flag: int, remark: str | None,
    ext: dict[str, str], body_length: int,
) -> None:  # fmt: skip
    cmd = _command(code, version, opaque, flag, remark, ext)
    head = kernel.encode_msgpack_head(
        SerializeType.MSGPACK, code, cmd.language.value, version, opaque, flag, remark, ext,
        body_length, 16 * 1024 * 1024,
    )  # fmt: skip
    try:
        packed = msgpack.packb(
            (code, cmd.language.value, version, opaque, flag, remark, ext), use_bin_type=True
        )
    except UnicodeEncodeError:
        assert head is None  # a lone surrogate: the reference raises its own error
        return
    assert head is not None
    prefix = struct.pack(">iI", 4 + len(packed) + body_length, (2 << 24) | len(packed))
    assert head == prefix + packed
    cmd.body = bytes(body_length)
    assert head == py_encode_frame_head(cmd, 16 * 1024 * 1024)


@pytest.mark.parametrize(
    "odd",
    [
        {"code": 2**31}, {"code": -(2**31) - 1}, {"code": True}, {"code": 1.0},
        {"flag": 2**40}, {"remark": b"bytes"}, {"ext": {"k": 1}}, {"ext": {1: "v"}},
        {"ext": {"k": "\ud800"}}, {"remark": "\udc80"},
    ],
)  # fmt: skip
def test_encoder_declines_what_the_reference_must_judge(kernel: Any, odd: dict[str, Any]) -> None:
    values: dict[str, Any] = {"code": 310, "flag": 0, "remark": None, "ext": {"a": "b"}} | odd
    head = kernel.encode_msgpack_head(
        SerializeType.MSGPACK, values["code"], 8, 400, 1, values["flag"], values["remark"],
        values["ext"], 0, 16 * 1024 * 1024,
    )  # fmt: skip
    assert head is None


def test_encoder_declines_a_frame_over_the_limit(kernel: Any) -> None:
    assert kernel.encode_msgpack_head(2, 310, 8, 400, 1, 0, None, {}, 100, 110) is None
    assert kernel.encode_msgpack_head(2, 310, 8, 400, 1, 0, None, {}, 100, 10**6) is not None


def _reference(data: bytes) -> object:
    try:
        return py_decode_msgpack_header(data)
    except RemoteProtocolError:
        return RemoteProtocolError


_ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.floats() | st.text()
    | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text() | st.binary(), inner, max_size=4)
    ),
    max_leaves=8,
)  # fmt: skip


@given(
    fields=st.tuples(_INT32, _INT32, _INT32, _INT32, _INT32, st.none() | _TEXT,
                     st.dictionaries(_TEXT, _TEXT, max_size=20)),
)  # fmt: skip
@settings(max_examples=300, deadline=None)
def test_decoder_reads_every_usual_header_as_the_reference(
    kernel: Any, fields: tuple[Any, ...]
) -> None:
    data = msgpack.packb(fields, use_bin_type=True)
    got = kernel.decode_msgpack_header(data)
    assert got is not None
    code, opaque, flag, language, version, remark, ext = got
    ref = py_decode_msgpack_header(data)
    assert (code, opaque, flag, version, remark, ext) == (
        ref[0],
        ref[1],
        ref[2],
        ref[4],
        ref[5],
        ref[6],
    )
    assert language == fields[1]


@given(
    items=st.lists(_ANY, min_size=7, max_size=7) | st.lists(_ANY, max_size=9),
    tail=st.binary(max_size=2),
)
@settings(max_examples=500, deadline=None)
def test_decoder_never_accepts_what_the_reference_refuses(
    kernel: Any, items: list[Any], tail: bytes
) -> None:
    try:
        data = msgpack.packb(items, use_bin_type=True) + tail
    except (ValueError, OverflowError):
        return  # not packable (an int past 64 bits)
    got = kernel.decode_msgpack_header(data)
    if got is not None:
        ref = _reference(data)
        assert ref is not RemoteProtocolError
        assert isinstance(ref, tuple)
        assert got[:3] + got[4:] == ref[:3] + ref[4:]


@given(data=st.binary(max_size=64))
@settings(max_examples=500, deadline=None)
def test_decoder_on_random_bytes_agrees_or_declines(kernel: Any, data: bytes) -> None:
    got = kernel.decode_msgpack_header(data)
    if got is not None:
        ref = _reference(data)
        assert isinstance(ref, tuple)
        assert got[:3] + got[4:] == ref[:3] + ref[4:]


def test_decoder_declines_non_canonical_shapes(kernel: Any) -> None:
    usual = [310, 8, 400, 1, 0, None, {"a": "b"}]
    assert kernel.decode_msgpack_header(msgpack.packb(usual)) is not None
    for odd in (
        [310, 8, 400, 1, 0, None, {"a": 1}],  # normalised by the reference
        [310, "PYTHON", 400, 1, 0, None, {}],  # a language name
        [2**31, 8, 400, 1, 0, None, {}],  # out of range: the reference says so
        [310, 8, 400, 1, 0, None, {"a": "b"}, 1],  # eight items
        [310, 8, 400, 1, 0, b"remark", {}],  # bin remark
    ):
        assert kernel.decode_msgpack_header(msgpack.packb(odd, use_bin_type=True)) is None
    assert kernel.decode_msgpack_header(msgpack.packb(usual) + b"\x00") is None
    assert kernel.decode_msgpack_header(b"\x97\xd9\xff") is None  # truncated
    assert (
        kernel.decode_msgpack_header(b"\x97\x00\x00\x00\x00\x00\xa1\xff\x80") is None
    )  # not UTF-8


# ------------------------------------------------------------------ split_msgpack

_MAX = 16 * 1024 * 1024


def _split(kernel: Any, buf: bytes, pos: int = 0, max_len: int = _MAX) -> tuple[list[Any], int]:
    result: tuple[list[Any], int] = kernel.split_msgpack(
        buf, pos, max_len, RemotingCommand, LANGUAGE_BY_VALUE, LanguageCode.OTHER,
        SerializeType.MSGPACK,
    )  # fmt: skip
    return result


def _frame(serialize_type: SerializeType, **fields: Any) -> bytes:
    return encode_frame(RemotingCommand(serialize_type=serialize_type, **fields))


def test_split_takes_usual_msgpack_frames_and_stops_where_the_reference_must_judge(
    kernel: Any,
) -> None:
    a = _frame(SerializeType.MSGPACK, code=310, opaque=1, ext_fields={"k": "v"}, body=b"x")
    b = _frame(
        SerializeType.MSGPACK, code=0, opaque=2, flag=1, remark="ok", language=LanguageCode.JAVA
    )
    json_frame = _frame(SerializeType.JSON, code=11, opaque=3)
    odd = struct.pack(">iI", 4 + 3, 2 << 24 | 3) + b"\x93\x01\x02"  # a 3-item array
    got, pos = _split(kernel, a + b + json_frame + a)
    assert pos == len(a + b) and [c.opaque for c in got] == [1, 2]
    assert got == [decode_frame_payload(a[4:]), decode_frame_payload(b[4:])]
    assert _split(kernel, a + odd + a)[1] == len(a)
    assert _split(kernel, a + b[:-1])[1] == len(a)  # cut short
    assert _split(kernel, a + b, pos=len(a))[1] == len(a + b)
    assert _split(kernel, b"\x00\x00\x00\x03" + a)[1] == 0  # length under 4
    assert _split(kernel, a, max_len=len(a) - 1)[1] == 0  # over the limit
    bad_header_len = struct.pack(">iI", 4 + 2, 2 << 24 | 9) + b"\x90\x90"
    assert _split(kernel, bad_header_len)[1] == 0
    unknown = _frame(SerializeType.MSGPACK, code=1, opaque=9)
    # [prefix 8][0x97][code 1][language]: language 126, no such code
    unknown = unknown[:10] + bytes([0x7E]) + unknown[11:]
    (cmd,), _ = _split(kernel, unknown)
    assert cmd.language is LanguageCode.OTHER == decode_frame_payload(unknown[4:]).language


_STREAM_FRAMES = st.one_of(
    st.builds(
        lambda st_, code, opaque, flag, remark, ext, body: _frame(
            st_, code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body
        ),
        st.sampled_from(list(SerializeType)),
        st.integers(-(2**15), 2**15 - 1),
        _INT32,
        _INT32,
        st.none() | st.text(max_size=10),
        st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=4),
        st.binary(max_size=40),
    ),
    st.builds(
        lambda t, header, body: (
            struct.pack(">iI", 4 + len(header) + len(body), t << 24 | len(header)) + header + body
        ),
        st.sampled_from([0, 1, 2, 3]),
        st.binary(max_size=30),
        st.binary(max_size=10),
    ),
)


def _decode_stream(stream: bytes, cuts: list[int]) -> object:
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    try:
        for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
            got += decoder.feed(stream[start:end])
    except RemoteProtocolError as exc:
        return got, str(exc)
    return got, decoder.buffered


@given(
    frames=st.lists(_STREAM_FRAMES, min_size=1, max_size=5),
    tail=st.binary(max_size=6),
    data=st.data(),
)
@settings(max_examples=300, deadline=None)
def test_a_decoder_with_the_kernel_decodes_any_stream_as_the_reference(
    kernel: Any, json_kernel: Any, frames: list[bytes], tail: bytes, data: st.DataObject
) -> None:
    """Usual MSGPACK and JSON frames, other types, random headers, a torn tail, any chunking: the
    same commands, the same buffered rest, or the same error with the same words."""
    stream = b"".join(frames) + tail
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=4)))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(frame_module, "_KERNEL", kernel)
        patch.setattr(frame_module, "_JSON_KERNEL", json_kernel)
        with_kernel = _decode_stream(stream, cuts)
        patch.setattr(frame_module, "_KERNEL", None)
        patch.setattr(frame_module, "_JSON_KERNEL", None)
        assert with_kernel == _decode_stream(stream, cuts)
