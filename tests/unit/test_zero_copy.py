"""BodyParts and its framing (issue 5), without sockets: the multi-part body keeps
its bytes apart up to the transport, reads like bytes where a caller asks, and is
released exactly once."""

from __future__ import annotations

import pytest

from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from aiorocketmq.remoting.command import BodyParts, RemotingCommand
from aiorocketmq.remoting.frame import (
    FrameDecoder,
    encode_frame,
    encode_frame_buffers,
    encode_frame_parts,
)


def _request() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "T"})


def test_body_parts_api() -> None:
    released: list[int] = []
    source = bytearray(b"abcdef")
    parts = BodyParts(
        [memoryview(source)[:2], b"", b"cd", memoryview(source)[4:]], lambda: released.append(1)
    )
    assert len(parts) == 6 and bool(parts)
    assert len(parts.parts) == 3  # the empty part is dropped
    assert bytes(parts) == b"abcdef"
    assert parts == b"abcdef" and parts == BodyParts([b"abc", b"def"])
    assert not BodyParts([])
    parts.release()
    parts.release()
    assert released == [1] and parts.released
    assert len(parts) == 6  # still known, for logs
    with pytest.raises(ValueError, match="after release"):
        _ = parts.parts


@pytest.mark.parametrize("serialize_type", list(SerializeType))
def test_parts_are_separate_gather_items_and_frame_like_joined(
    serialize_type: SerializeType,
) -> None:
    chunks = [b"x" * 100, memoryview(b"y" * 50), b"z"]
    request = _request()
    request.serialize_type = serialize_type
    with_parts = request.response_to(ResponseCode.SUCCESS, "FOUND", {"a": "1"}, BodyParts(chunks))
    joined = request.response_to(ResponseCode.SUCCESS, "FOUND", {"a": "1"}, b"".join(chunks))
    assert with_parts.body == b"" and with_parts.body_parts is not None
    assert with_parts.body_length == joined.body_length == 151
    assert with_parts.body_bytes() == joined.body_bytes()
    items = encode_frame_buffers(with_parts)
    assert len(items) == 1 + 3
    # No copy on the way: each item is a view of the caller's own buffer.
    sources = [memoryview(chunk).obj for chunk in chunks]
    assert [memoryview(item).obj for item in items[1:]] == sources
    assert all(a is b for a, b in zip([memoryview(i).obj for i in items[1:]], sources, strict=True))
    wire = b"".join(bytes(item) for item in items)
    assert wire == encode_frame(joined) == encode_frame(with_parts)
    (decoded,) = FrameDecoder().feed(wire)
    assert decoded.body == b"".join(chunks) and decoded.body_parts is None
    assert "body=151B" in with_parts.describe()


def test_too_long_frame_with_parts_is_refused_before_any_write() -> None:
    parts = BodyParts([b"a" * 600, b"b" * 600])
    reply = _request().response_to(ResponseCode.SUCCESS, body=parts)
    with pytest.raises(LocalProtocolError, match="exceeds"):
        encode_frame_parts(reply, max_frame_length=1000)
    assert not parts.released  # encoding never releases: the writer decides


def test_empty_body_adds_no_gather_item() -> None:
    assert len(encode_frame_buffers(_request())) == 1
    reply = _request().response_to(ResponseCode.SUCCESS, body=BodyParts([b""]))
    assert len(encode_frame_buffers(reply)) == 1
