# The compiled twin of remoting.frame's MSGPACK paths (_frame_kernels.pyx).
from typing import TypeVar

from aiorocketmq.remoting.command import Body

_C = TypeVar("_C")

def decode_msgpack_header(
    data: Body,
) -> tuple[int, int, int, int, int, str | None, dict[str, str]] | None: ...
def encode_msgpack_head(
    serialize_type: int,
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext: dict[str, str],
    body_length: int,
    max_frame_length: int,
) -> bytes | None: ...

# RemotingCommand(...) built in place (RemotingCommand.request's way when built).
def new_command(
    cls: type[_C],
    code: int,
    opaque: int,
    flag: int,
    language: int,
    version: int,
    remark: str | None,
    ext: dict[str, str],
    body: Body,
    serialize_type: int,
) -> _C: ...
