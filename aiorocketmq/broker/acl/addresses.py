"""White-listed remote addresses of plain ACL (Java's ``RemoteAddressStrategyFactory``).

Patterns, as RocketMQ 4.9 accepts them in ``globalWhiteRemoteAddresses`` and an
account's ``whiteRemoteAddress``:

=======================  ==========================================================
blank                    matches nothing
``*``, ``*.*.*.*``,      matches every address
``*:*:*:*:*:*:*:*``
``192.168.0.{1,2,30}``   the listed last segments (IPv6: ``fe80::{1,2}``)
``1.2.3.4,5.6.7.8``      the listed addresses
``10.10.*.*``,           a segment may be ``*`` or ``a-b`` (IPv6 segments in hex)
``192.168.1.10-20``
``1.2.3.4``, ``::1``     that one address
=======================  ==========================================================

Java compares only the first wildcard segment and ignores those after it (so its
``192.*.1.1`` matches ``192.5.7.8``); here every segment must match. For the
usual patterns (wildcards to the right) the two agree.

Owns: parsing a pattern (a bad one raises ``AclConfigError`` with Java's text) and
matching an address against it.

Must not: know about accounts or requests.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Final

from aiorocketmq.common.errors import RocketMQError

__all__ = ["AclConfigError", "AddressMatcher", "parse_address_pattern"]

_EVERY: Final = frozenset(("*", "*.*.*.*", "*:*:*:*:*:*:*:*"))

#: A compiled pattern: True when the (port-less) remote address is white-listed.
AddressMatcher = Callable[[str], bool]


class AclConfigError(RocketMQError):
    """A plain ACL file or one of its values is malformed (Java's ``AclException``)."""


def _never(_address: str) -> bool:
    return False


def _always(_address: str) -> bool:
    return True


def _canonical(address: str) -> str | None:
    """The address in one spelling (IPv6 fully expanded), or None when it is not one."""
    try:
        parsed = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address):
        return parsed.exploded.upper()
    return str(parsed)


def _exact(address: str) -> str:
    canonical = _canonical(address)
    if canonical is None:
        raise AclConfigError(f"Netaddress examine Exception netaddress is {address}")
    return canonical


def _segments(address: str) -> list[int] | None:
    """An address as 4 (IPv4) or 8 (IPv6) integers, or None."""
    canonical = _canonical(address)
    if canonical is None:
        return None
    if ":" in canonical:
        return [int(part, 16) for part in canonical.split(":")]
    return [int(part) for part in canonical.split(".")]


def _expand_v6_pattern(pattern: str) -> list[str]:
    """A v6 pattern's 8 segment texts (``::`` filled with ``0``)."""
    head, sep, tail = pattern.partition("::")
    left = head.split(":") if head else []
    right = tail.split(":") if tail else []
    if sep:
        return [*left, *["0"] * (8 - len(left) - len(right)), *right]
    return left


def _range(pattern: str) -> AddressMatcher:
    v6 = ":" in pattern
    texts = _expand_v6_pattern(pattern) if v6 else pattern.split(".")
    base, top = (16, 0xFFFF) if v6 else (10, 255)
    if len(texts) != (8 if v6 else 4):
        raise AclConfigError(f"Netaddress examine scope Exception netaddress is {pattern}")
    bounds: list[tuple[int, int]] = []
    try:
        for raw in texts:
            text = raw.strip()
            if text == "*":
                bounds.append((0, top))
            elif "-" in text:
                low_text, _, high_text = text.partition("-")
                low, high = int(low_text, base), int(high_text, base)
                if not 0 <= low <= high <= top:
                    raise AclConfigError(
                        "RangeRemoteAddressStrategy netaddress examine scope Exception "
                        f"start is {low} , end is {high}"
                    )
                bounds.append((low, high))
            else:
                value = int(text, base)
                if not 0 <= value <= top:
                    raise ValueError(text)
                bounds.append((value, value))
    except ValueError:
        raise AclConfigError(
            f"Netaddress examine scope Exception netaddress is {pattern}"
        ) from None
    size = len(bounds)

    def match(address: str) -> bool:
        values = _segments(address)
        if values is None or len(values) != size:
            return False
        return all(low <= v <= high for v, (low, high) in zip(values, bounds, strict=True))

    return match


def _braces(pattern: str) -> list[str]:
    """``a.b.c.{1,2}`` -> ``[a.b.c.1, a.b.c.2]`` (Java's ``AclUtils.getAddresses``)."""
    head, brace, inner = pattern.rpartition("{")
    separator = ":" if ":" in pattern else "."
    if not brace or not head.endswith(separator):
        raise AclConfigError(
            f"MultipleRemoteAddressStrategy netaddress examine scope Exception netaddress {pattern}"
        )
    return [head + item.strip() for item in inner[:-1].split(",") if item.strip()]


def parse_address_pattern(pattern: str | None) -> AddressMatcher:
    """Compile one white-list pattern (see the module docstring).

    Raises:
        AclConfigError: the pattern is not an address, a list or a range.
    """
    text = (pattern or "").strip()
    if not text:
        return _never
    if text in _EVERY:
        return _always
    if text.endswith("}") or "," in text:
        members = _braces(text) if text.endswith("}") else text.split(",")
        allowed = frozenset(_exact(member) for member in members)
        return lambda address: _canonical(address) in allowed
    if "*" in text or "-" in text:
        return _range(text)
    one = _exact(text)
    return lambda address: _canonical(address) == one
