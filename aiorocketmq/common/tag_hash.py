"""Java ``String.hashCode`` and the two RocketMQ hashes built on it.

Owns: ``java_string_hash`` (over UTF-16 code units with 32-bit signed wrap-around),
``tags_code`` (what a ConsumeQueue unit stores for a message's ``TAGS``, and what a
subscription's code set holds), ``index_key_hash`` (the IndexFile slot hash of
``topic#key``) and ``index_key_hashes``, the same for many keys in one numpy pass
(the dispatcher hashes a whole chunk's keys at once).

The three hashes have C twins (``_hash_kernels.pyx``), used when built and not
turned off (``common.kernels``); the functions here named ``py_*`` are the reference,
and the tests run against both.

Must not: do I/O, or hash anything any other way: the broker's tag filter and the
IndexFile must agree bit for bit with files and heartbeats written by Java.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from aiorocketmq.common.kernels import load_kernel

_MASK32: Final = 0xFFFFFFFF
_SIGN32: Final = 0x80000000
_INT_MIN: Final = -0x80000000


def py_java_string_hash(text: str) -> int:
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


def py_index_key_hash(key: str) -> int:
    """Return the IndexFile hash of a key (``IndexFile.indexKeyHashMethod``).

    Java takes ``Math.abs(key.hashCode())`` and maps the one negative result,
    ``abs(Integer.MIN_VALUE)``, to 0.

    Args:
        key: the full index key, normally ``index_key(topic, key)``.

    Returns:
        A value in ``[0, 2**31 - 1]``.
    """
    h = py_java_string_hash(key)
    if h == _INT_MIN:
        return 0
    return -h if h < 0 else h


_POW31: list[npt.NDArray[np.uint64]] = [np.ones(1, dtype=np.uint64)]


def _powers_of_31(n: int) -> npt.NDArray[np.uint64]:
    """``31**k mod 2**64`` for ``k < n`` (grown on demand, kept)."""
    table = _POW31[0]
    if len(table) < n:
        size = max(n, 2 * len(table), 256)
        powers = [1] * size
        for k in range(1, size):
            powers[k] = powers[k - 1] * 31 & 0xFFFFFFFFFFFFFFFF
        table = _POW31[0] = np.array(powers, dtype=np.uint64)
    return table


def py_index_key_hashes(keys: Sequence[str]) -> npt.NDArray[np.int64]:
    """``index_key_hash`` of every key, in one vectorised pass when all are ASCII.

    ``hashCode`` is ``sum(c[i] * 31**(n-1-i))`` mod 2**32; computed mod 2**64 in
    uint64 (wrapping) it agrees in the low 32 bits, which are all Java keeps.

    Args:
        keys: full index keys (``topic#key``).

    Returns:
        One value in ``[0, 2**31 - 1]`` per key, as ``index_key_hash`` gives.
    """
    count = len(keys)
    joined = "".join(keys)
    if not joined.isascii():
        return np.fromiter(map(py_index_key_hash, keys), dtype=np.int64, count=count)
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=count)
    ends = np.cumsum(lengths)
    units = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).astype(np.uint64)
    # Each unit's power: how many units follow it within its own key.
    owner = np.repeat(np.arange(count), lengths)
    exponent = ends[owner] - 1 - np.arange(len(units), dtype=np.int64)
    terms = units * _powers_of_31(int(lengths.max(initial=0)))[exponent]
    # Per-key sums as differences of one running sum (wrapping, so still exact mod 2**64).
    running = np.zeros(len(units) + 1, dtype=np.uint64)
    np.cumsum(terms, out=running[1:])
    sums = running[ends] - running[ends - lengths]
    low = (sums & np.uint64(_MASK32)).astype(np.int64)
    signed = np.where(low >= _SIGN32, low - 0x100000000, low)
    # Math.abs, and abs(Integer.MIN_VALUE) (still negative in Java) taken as 0.
    return np.where(signed == _INT_MIN, 0, np.abs(signed))


def _c_index_key_hashes(keys: Sequence[str]) -> npt.NDArray[np.int64]:
    """``py_index_key_hashes`` by the C kernel: one call, no per-key Python step."""
    out = np.empty(len(keys), dtype=np.int64)
    assert _KERNEL is not None
    _KERNEL.fill_index_key_hashes(keys if isinstance(keys, list) else list(keys), out.data)
    return out


_KERNEL = load_kernel("aiorocketmq.common._hash_kernels")
#: Java's ``String.hashCode`` (see ``py_java_string_hash``), in C when built.
java_string_hash: Callable[[str], int] = (
    _KERNEL.java_string_hash if _KERNEL is not None else py_java_string_hash
)
#: The IndexFile hash of one key (see ``py_index_key_hash``), in C when built.
index_key_hash: Callable[[str], int] = (
    _KERNEL.index_key_hash if _KERNEL is not None else py_index_key_hash
)
#: The IndexFile hashes of many keys (see ``py_index_key_hashes``), in C when built.
index_key_hashes: Callable[[Sequence[str]], npt.NDArray[np.int64]] = (
    _c_index_key_hashes if _KERNEL is not None else py_index_key_hashes
)


def index_key(topic: str, key: str) -> str:
    """Build the IndexFile key for a message key or UNIQ_KEY (``topic + "#" + key``)."""
    return f"{topic}#{key}"
