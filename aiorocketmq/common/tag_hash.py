"""Java ``String.hashCode`` and the two RocketMQ hashes built on it.

Owns: ``java_string_hash`` (over UTF-16 code units with 32-bit signed wrap-around),
``tags_code`` (what a ConsumeQueue unit stores for a message's ``TAGS``, and what a
subscription's code set holds) and ``index_key_hash`` (the IndexFile slot hash of
``topic#key``).

Must not: do I/O, or hash anything any other way: the broker's tag filter and the
IndexFile must agree bit for bit with files and heartbeats written by Java.
"""

from __future__ import annotations

import struct
from typing import Final

_MASK32: Final = 0xFFFFFFFF
_SIGN32: Final = 0x80000000
_INT_MIN: Final = -0x80000000


def java_string_hash(text: str) -> int:
    """Return Java's ``text.hashCode()``.

    ``h = 31 * h + c`` over the UTF-16 code units of the string, wrapped to a signed
    32-bit int. A character outside the BMP counts as its two surrogates; a lone
    surrogate in ``text`` counts as itself, as it would in a Java string.

    Args:
        text: any string.

    Returns:
        A value in ``[-2**31, 2**31 - 1]``; 0 for ``""``.
    """
    h = 0
    if text.isascii():
        # ASCII: one byte per UTF-16 code unit, so the encoded bytes are the units.
        for unit in text.encode("ascii"):
            h = (31 * h + unit) & _MASK32
    else:
        data = text.encode("utf-16-be", "surrogatepass")
        for unit in struct.unpack(f">{len(data) // 2}H", data):
            h = (31 * h + unit) & _MASK32
    return h - 0x100000000 if h & _SIGN32 else h


def tags_code(tags: str | None) -> int:
    """Return the tagsCode of a message's ``TAGS`` (``tagsString2tagsCode``).

    Args:
        tags: the ``TAGS`` property, or None.

    Returns:
        0 when there are no tags, else ``java_string_hash(tags)`` (a signed value that
        a ConsumeQueue stores sign-extended in its 8-byte field).
    """
    if not tags:
        return 0
    return java_string_hash(tags)


def index_key_hash(key: str) -> int:
    """Return the IndexFile hash of a key (``IndexFile.indexKeyHashMethod``).

    Java takes ``Math.abs(key.hashCode())`` and maps the one negative result,
    ``abs(Integer.MIN_VALUE)``, to 0.

    Args:
        key: the full index key, normally ``index_key(topic, key)``.

    Returns:
        A value in ``[0, 2**31 - 1]``.
    """
    h = java_string_hash(key)
    if h == _INT_MIN:
        return 0
    return -h if h < 0 else h


def index_key(topic: str, key: str) -> str:
    """Build the IndexFile key for a message key or UNIQ_KEY (``topic + "#" + key``)."""
    return f"{topic}#{key}"
