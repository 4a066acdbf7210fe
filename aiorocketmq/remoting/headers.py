"""Typed reads and writes of ``extFields``, with Java's parsing rules.

Owns: the helpers every typed request/response header uses to turn extFields
strings into ints, longs and booleans (``Integer.parseInt``, ``Long.parseLong``,
``Boolean.parseBoolean`` plus the C++ client's ``"0"``/``"1"``), with RocketMQ's
error remark when a required field is missing, and the reverse (values to strings,
``None`` left out), since the C++ client reads reply fields only when they are
JSON strings.

Must not: use reflection. A header class lists its fields explicitly in its
``from_ext_fields`` / ``to_ext_fields`` (see STYLE.md §4.4).
"""

from __future__ import annotations

from collections.abc import Mapping

from aiorocketmq.remoting.errors import HeaderFieldError

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


def _missing(name: str) -> HeaderFieldError:
    # The exact text of Java's RemotingCommand.checkFields.
    return HeaderFieldError(f"the custom field <{name}> is null")


def ext_str(fields: Mapping[str, str], name: str, default: str | None = None) -> str:
    """A required string field, or ``default`` when given and the field is absent."""
    value = fields.get(name)
    if value is None:
        if default is None:
            raise _missing(name)
        return default
    return value


def ext_opt_str(fields: Mapping[str, str], name: str) -> str | None:
    """An optional string field."""
    return fields.get(name)


def _parse_int(name: str, value: str, bounds: tuple[int, int], kind: str) -> int:
    # The usual field: up to 9 ASCII digits fits every kind and needs no other check.
    if len(value) < 10 and value.isdigit() and value.isascii():
        number = int(value)
        if bounds[0] <= number <= bounds[1]:
            return number
    text = value.strip()
    # Java rejects "1_000", " 1" and "1.0"; Python's int() would take the first two.
    body = text[1:] if text[:1] in "+-" else text
    if not body.isascii() or not body.isdigit() or text != value:
        raise HeaderFieldError(f"the custom field <{name}> is not a valid {kind}: {value!r}")
    # Past 4,300 digits (leading zeros count) int() raises ValueError; Java takes any
    # number of leading zeros, and no in-range value has 20 significant digits.
    digits = body.lstrip("0") or "0"
    if len(digits) > 19:
        raise HeaderFieldError(f"the custom field <{name}> is out of {kind} range: {value!r}")
    number = -int(digits) if text[:1] == "-" else int(digits)
    if not bounds[0] <= number <= bounds[1]:
        raise HeaderFieldError(f"the custom field <{name}> is out of {kind} range: {value!r}")
    return number


def ext_int(fields: Mapping[str, str], name: str, default: int | None = None) -> int:
    """A 32-bit integer field (Java ``Integer``)."""
    value = fields.get(name)
    if value is None:
        if default is None:
            raise _missing(name)
        return default
    return _parse_int(name, value, _INT32, "int")


def ext_long(fields: Mapping[str, str], name: str, default: int | None = None) -> int:
    """A 64-bit integer field (Java ``Long``)."""
    value = fields.get(name)
    if value is None:
        if default is None:
            raise _missing(name)
        return default
    return _parse_int(name, value, _INT64, "long")


def ext_opt_int(fields: Mapping[str, str], name: str) -> int | None:
    """An optional 32-bit integer field."""
    value = fields.get(name)
    return None if value is None else _parse_int(name, value, _INT32, "int")


def ext_opt_long(fields: Mapping[str, str], name: str) -> int | None:
    """An optional 64-bit integer field."""
    value = fields.get(name)
    return None if value is None else _parse_int(name, value, _INT64, "long")


def ext_bool(fields: Mapping[str, str], name: str, default: bool | None = None) -> bool:
    """A boolean field: ``true``/``false`` any case, and the C++ 1.2.x ``1``/``0``.

    A Java broker reads ``"1"`` as false and so mishandles C++ batch sends; we do not.
    """
    value = fields.get(name)
    if value is None:
        if default is None:
            raise _missing(name)
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise HeaderFieldError(f"the custom field <{name}> is not a boolean: {value!r}")


def to_ext_fields(**values: object) -> dict[str, str]:
    """Values to extFields strings: ``None`` left out, booleans as ``true``/``false``."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out
