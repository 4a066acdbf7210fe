"""JSON the way RocketMQ's Java side (fastjson) writes it, and a reader that takes it.

Owns: ``dumps`` (compact JSON text; optionally fastjson's *unquoted integer map
keys*, ``{0:"127.0.0.1:10911"}``, which is what a 4.x name server sends to clients
older than 4.9.4), ``loads`` (standard JSON, plus those unquoted integer keys,
for anything a Java process wrote: route bodies, cluster info, config files), and
the lenient field readers (``get_int``...) that body models use, since fastjson
turns ``"4"`` into an ``int`` field and ``4`` into a ``String`` one.

Must not: do I/O, or let a parse error escape as anything but ``RemoteProtocolError``.

Facts (``specs/remoting.md`` §5.1): fastjson quotes ``String`` map keys but writes
keys of other types (``Long`` broker ids, ``Integer`` delay levels) bare. That text
is not JSON; both stock clients parse it anyway (jsoncpp with numeric keys allowed,
ali-ons through an eval-based parser), and both also accept quoted keys. Bean fields
come out sorted by name, nulls left out; callers build their dicts in that order.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final, cast

from aiorocketmq.common.errors import RemoteProtocolError

__all__ = [
    "JsonDict",
    "as_dict",
    "as_list",
    "dumps",
    "dumps_bytes",
    "dumps_pretty",
    "get_bool",
    "get_int",
    "get_opt_str",
    "get_str",
    "get_str_list",
    "loads",
    "loads_object",
]

# Encoders built once: json.dumps with non-default options builds one per call.
_ENCODERS: Final = {
    ascii_only: json.JSONEncoder(separators=(",", ":"), ensure_ascii=ascii_only)
    for ascii_only in (False, True)
}
_QUOTE: Final = {False: json.encoder.encode_basestring, True: json.encoder.encode_basestring_ascii}

# One pass over the text: a string literal (kept as is, so a "{0:" inside a value
# is never touched) or a bare integer object key after "{" or ",".
_BARE_INT_KEY: Final = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)', re.DOTALL)


def dumps(value: Any, *, unquoted_int_keys: bool = False, ascii_only: bool = False) -> str:
    """Compact JSON text of ``value`` (dicts keep their insertion order).

    Args:
        value: dicts, lists/tuples, str, int, float, bool and None.
        unquoted_int_keys: write ``int`` dict keys bare, as fastjson does by
            default (``{0:"a"}``); otherwise they are quoted (``{"0":"a"}``).
        ascii_only: escape non-ASCII characters (fastjson's ``BrowserCompatible``).

    Returns:
        The text. Without ``unquoted_int_keys`` it is standard JSON.
    """
    if not unquoted_int_keys:
        return _ENCODERS[ascii_only].encode(value)
    out: list[str] = []
    _write(value, out, ascii_only)
    return "".join(out)


def dumps_bytes(value: Any, *, unquoted_int_keys: bool = False, ascii_only: bool = False) -> bytes:
    """``dumps`` encoded as UTF-8: what goes into a remoting body."""
    return dumps(value, unquoted_int_keys=unquoted_int_keys, ascii_only=ascii_only).encode()


def dumps_pretty(value: Any) -> str:
    """fastjson's ``PrettyFormat`` text, as RocketMQ writes its config files.

    ``RemotingSerializable.toJson(obj, true)`` (fastjson 1.2.69): objects open
    ``{``, put each string-keyed entry on its own line indented by one more tab
    than the object, and close on a line of their own; entries with integer keys
    stay on the opening line, bare (``{0:250,1:250``), as fastjson's MapSerializer
    prints a line break only before string keys. Empty objects are ``{}``. No
    space after ``:``. Lists and scalars are written compactly.
    """
    out: list[str] = []
    _write_pretty(value, out, 0)
    return "".join(out)


def _write_pretty(value: Any, out: list[str], indent: int) -> None:
    if not isinstance(value, dict):
        out.append(dumps(value, unquoted_int_keys=True))
        return
    out.append("{")
    first = True
    for key, item in value.items():
        if not first:
            out.append(",")
        first = False
        if isinstance(key, int) and not isinstance(key, bool):
            out.append(f"{key}:")
        else:
            out.append("\n" + "\t" * (indent + 1) + _QUOTE[False](str(key)) + ":")
        _write_pretty(item, out, indent + 1)
    if value:
        out.append("\n" + "\t" * indent)
    out.append("}")


def _has_int_key(value: Any) -> bool:
    """Whether any object in ``value`` has an ``int`` key (needs the bare-key writer)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, int) and not isinstance(key, bool):
                return True
            if isinstance(item, dict | list | tuple) and _has_int_key(item):
                return True
        return False
    if isinstance(value, list | tuple):
        return any(isinstance(item, dict | list | tuple) and _has_int_key(item) for item in value)
    return False


def _write(value: Any, out: list[str], ascii_only: bool) -> None:
    # Subtrees without integer keys go through the C encoder in one call: a route's
    # queueDatas cost one call, only brokerDatas are walked here.
    if not _has_int_key(value):
        out.append(_ENCODERS[ascii_only].encode(value))
        return
    quote = _QUOTE[ascii_only]
    if isinstance(value, dict):
        sep = "{"
        for key, item in value.items():
            out.append(sep)
            sep = ","
            if isinstance(key, int) and not isinstance(key, bool):
                out.append(str(key))  # the fastjson quirk: a bare number as key
            else:
                out.append(quote(str(key)))
            out.append(":")
            if isinstance(item, str):  # the common leaf, without another call
                out.append(quote(item))
            else:
                _write(item, out, ascii_only)
        out.append("}")
    else:  # a list or tuple holding an object with integer keys
        sep = "["
        for item in value:
            out.append(sep)
            sep = ","
            _write(item, out, ascii_only)
        out.append("]")


def _quote_key(match: re.Match[str]) -> str:
    if match.group(2) is None:
        return match.group(0)
    return f'{match.group(1)}"{match.group(2)}"{match.group(3)}'


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON text, accepting fastjson's unquoted integer object keys.

    Integer keys come back as strings (``{0:"a"}`` gives ``{"0": "a"}``), as with
    quoted keys; models turn them into ints where Java has ``Long`` keys.

    Raises:
        RemoteProtocolError: the input is not UTF-8 or not (tolerant) JSON.
    """
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(f"JSON body is not UTF-8: {exc}") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise RemoteProtocolError("JSON nested too deeply") from None
    except json.JSONDecodeError as first:
        # The common case for Java-written text: retry once with bare keys quoted.
        fixed = _BARE_INT_KEY.sub(_quote_key, text)
        if fixed == text:
            raise RemoteProtocolError(f"not JSON: {first}") from None
        try:
            return json.loads(fixed)
        except (ValueError, RecursionError) as exc:
            raise RemoteProtocolError(f"not JSON: {exc}") from None
    except ValueError as exc:
        # A number past Python's 4,300-digit int() limit: not a JSONDecodeError.
        raise RemoteProtocolError(f"not JSON: {exc}") from None


# -- lenient field readers: fastjson converts strings and numbers into a field's type --

JsonDict = dict[str, Any]


def as_dict(value: object, what: str) -> JsonDict:
    """``value`` if it is a JSON object, else ``RemoteProtocolError`` naming ``what``."""
    if not isinstance(value, dict):
        raise RemoteProtocolError(f"{what}: expected a JSON object, got {type(value).__name__}")
    return cast(JsonDict, value)


def as_list(value: object, what: str) -> list[Any]:
    """``value`` if it is a JSON array (null reads as empty), else ``RemoteProtocolError``."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RemoteProtocolError(f"{what}: expected a JSON array, got {type(value).__name__}")
    return value


def get_str(d: JsonDict, key: str, default: str | None = None) -> str:
    """A string field (numbers become text); missing without ``default`` is an error."""
    value = d.get(key)
    if value is None:
        if default is None:
            raise RemoteProtocolError(f"field {key!r} is missing")
        return default
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise RemoteProtocolError(f"field {key!r}: expected a string, got {value!r}")


def get_opt_str(d: JsonDict, key: str) -> str | None:
    """An optional string field."""
    return None if d.get(key) is None else get_str(d, key)


def get_int(d: JsonDict, key: str, default: int) -> int:
    """An integer field (decimal text accepted); missing or null gives ``default``."""
    value = d.get(key)
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise RemoteProtocolError(f"field {key!r}: expected an integer, got {value!r}")


def get_bool(d: JsonDict, key: str, default: bool) -> bool:
    """A boolean field (``"true"``/``"false"`` accepted); missing gives ``default``."""
    value = d.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise RemoteProtocolError(f"field {key!r}: expected a boolean, got {value!r}")


def get_str_list(value: object, what: str) -> list[str]:
    """A JSON array of strings (null reads as empty)."""
    items = as_list(value, what)
    if not all(isinstance(item, str) for item in items):
        raise RemoteProtocolError(f"{what}: expected an array of strings")
    return items


def loads_object(data: bytes | bytearray | memoryview | str, what: str) -> JsonDict:
    """``loads`` that must give a JSON object."""
    return as_dict(loads(data), what)
