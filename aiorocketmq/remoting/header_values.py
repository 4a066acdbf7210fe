"""What every header codec shares: RemotingCommand's leading fields as a tuple, and the
checks and conversions of their values.

Owns: reading a peer's extFields values as the strings Java would see (numbers and
booleans from JSON and MSGPACK peers), the int32/int16 bounds of code, opaque, flag and
version, the language field, and the check that a command can go on the wire at all.

Must not: know any one serialisation (``frame`` has the three codecs).
"""

from __future__ import annotations

import json
from typing import Final

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.remoting.codes import LanguageCode
from aiorocketmq.remoting.command import RemotingCommand

__all__ = [
    "INT16_MAX",
    "INT16_MIN",
    "INT32_MAX",
    "INT32_MIN",
    "LANGUAGE_BY_NAME",
    "LANGUAGE_BY_VALUE",
    "HeaderFields",
    "as_int",
    "check_encodable",
    "language_of",
    "normalize_ext_fields",
    "normalize_ext_value",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT16_MIN, INT16_MAX = -(2**15), 2**15 - 1


#: code, opaque, flag, language, version, remark, ext_fields: RemotingCommand's field order.
HeaderFields = tuple[int, int, int, LanguageCode, int, str | None, dict[str, str]]

#: A header's language name -> LanguageCode (an unknown one is OTHER).
LANGUAGE_BY_NAME: Final = {lang.name: lang for lang in LanguageCode}
#: A header's language code -> LanguageCode (``language_of`` reads an int this way;
#: an unknown one is OTHER).
LANGUAGE_BY_VALUE: Final = {lang.value: lang for lang in LanguageCode}


def normalize_ext_value(value: object) -> str | None:
    """Turn one extFields value as a peer sent it into the string Java would see.

    Stock clients send strings, numbers and booleans (``specs/remoting.md`` §2.6).
    ``None`` means the field is absent. Nested JSON becomes its compact text.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if value is None:
        return None
    if isinstance(value, float):
        return repr(value)
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        # A MSGPACK header can carry bin values, bin map keys and ext types, which
        # have no JSON text; that is the peer's malformed frame, not our crash.
        raise RemoteProtocolError(f"extFields value cannot be read as text: {exc}") from exc


def normalize_ext_fields(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RemoteProtocolError("extFields is not an object")
    # Nearly every header holds only strings (ours, and the stock clients' MSGPACK-free
    # frames after JSON parsing): then the decoded dict is the answer, uncopied.
    for key, value in raw.items():
        if type(value) is not str or type(key) is not str:
            return _normalized_copy(raw)
    return raw


def _normalized_copy(raw: dict[object, object]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in raw.items():
        if type(key) is not str:
            raise RemoteProtocolError("extFields key is not a string")
        if type(value) is str:
            out[key] = value
        elif type(value) is int:  # the C++ client's JSON numbers (bool is not int here)
            out[key] = str(value)
        else:
            text = normalize_ext_value(value)
            if text is not None:
                out[key] = text
    return out


def as_int(value: object, name: str, low: int = INT32_MIN, high: int = INT32_MAX) -> int:
    # bool is an int subclass; a header with "code": true is malformed, not code 1.
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        # fastjson coerces numeric strings, so a lenient peer may send "10".
        try:
            number = int(value)
        except ValueError:
            raise RemoteProtocolError(f"header field {name} is not an integer: {value!r}") from None
    else:
        raise RemoteProtocolError(f"header field {name} is not an integer: {value!r}")
    if not low <= number <= high:
        raise RemoteProtocolError(f"header field {name} out of range: {number}")
    return number


def language_of(value: object) -> LanguageCode:
    # An unknown language is not worth dropping a connection for: newer clients add some.
    if isinstance(value, str):
        return LANGUAGE_BY_NAME.get(value, LanguageCode.OTHER)
    if isinstance(value, int) and not isinstance(value, bool):
        return LANGUAGE_BY_VALUE.get(value, LanguageCode.OTHER)
    if value is None:
        return LanguageCode.JAVA
    raise RemoteProtocolError(f"header field language is invalid: {value!r}")


def check_encodable(cmd: RemotingCommand, low: int, high: int) -> None:
    for name, value in (("code", cmd.code), ("opaque", cmd.opaque), ("flag", cmd.flag)):
        if not INT32_MIN <= value <= INT32_MAX:
            raise LocalProtocolError(f"{name} {value} does not fit in an int32")
    if not low <= cmd.code <= high or not low <= cmd.version <= high:
        raise LocalProtocolError(f"code {cmd.code} or version {cmd.version} out of range")
    for key, text in cmd.ext_fields.items():
        # The dict is typed str -> str, but callers are Python: check what reaches the wire.
        if type(text) is not str or type(key) is not str:
            raise LocalProtocolError(f"extFields[{key!r}] must be str -> str, got {text!r}")
