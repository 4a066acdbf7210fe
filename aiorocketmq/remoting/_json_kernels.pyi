# The compiled twin of remoting.frame's JSON paths (_json_kernels.pyx).
from typing import Any

from aiorocketmq.remoting.codes import LanguageCode
from aiorocketmq.remoting.command import Body

def decode_json_header(
    data: Body,
    values: dict[int, LanguageCode],
    names: dict[str, LanguageCode],
    other_language: LanguageCode,
    java_language: LanguageCode,
) -> tuple[int, int, int, LanguageCode, int, str | None, dict[str, str]] | None: ...
def split_json(
    buf: Body,
    pos: int,
    max_frame_length: int,
    cls: Any,
    languages: dict[int, LanguageCode],
    language_names: dict[str, LanguageCode],
    other_language: LanguageCode,
    java_language: LanguageCode,
    serialize_type: Any,
) -> tuple[list[Any], int]: ...
def encode_json_head(
    code: int,
    language_name: str,
    version: int,
    opaque: int,
    flag: int,
    remark: str | None,
    ext: dict[str, str],
    body_length: int,
    max_frame_length: int,
) -> bytes | None: ...
