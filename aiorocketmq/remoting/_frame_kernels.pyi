# The compiled twin of remoting.frame's MSGPACK paths (_frame_kernels.pyx).
from aiorocketmq.remoting.command import Body

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
