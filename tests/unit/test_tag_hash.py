"""Java String.hashCode, tagsCode and the IndexFile key hash, in C and in Python.

Every hash test runs on both sides: ``hashes`` is the pure-Python reference or the C
kernel (``_hash_kernels.pyx``), and a last test checks that ``tag_hash`` binds the
kernel when it is built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common import tag_hash
from aiorocketmq.common.kernels import extensions_disabled
from aiorocketmq.common.tag_hash import index_key, tags_code
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip


@dataclass(frozen=True)
class Hashes:
    java_string_hash: Callable[[str], int]
    index_key_hash: Callable[[str], int]
    index_key_hashes: Callable[[Sequence[str]], Any]


@pytest.fixture(params=IMPLEMENTATIONS, scope="module")
def hashes(request: pytest.FixtureRequest) -> Hashes:
    if request.param == "python":
        return Hashes(
            tag_hash.py_java_string_hash, tag_hash.py_index_key_hash, tag_hash.py_index_key_hashes
        )
    kernel_or_skip("aiorocketmq.common._hash_kernels")
    return Hashes(tag_hash.java_string_hash, tag_hash.index_key_hash, tag_hash.index_key_hashes)


def reference_index_hash(key: str) -> int:
    h = reference_hash(key)
    return 0 if h == -(2**31) else abs(h)


def reference_hash(text: str) -> int:
    """Straightforward Java hashCode: unbounded arithmetic, one wrap at the end."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = h * 31 + int.from_bytes(units[i : i + 2], "big")
    h %= 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("TagA", 2598919),  # the spec's check value (ali-ons codeSet)
        ("TagB", 2598920),
        ("TagC", 2598921),
        ("Aa", 2112),  # the classic collision with "BB"
        ("BB", 2112),
        ("hello world", 1794106052),
        ("polygenelubricants", -(2**31)),  # hashes to Integer.MIN_VALUE
        ("é", 233),
        ("中", 20013),
        ("中文", 20013 * 31 + 0x6587),  # 646394
        ("😀", 0xD83D * 31 + 0xDE00),  # U+1F600 as its surrogate pair
        ("a😀b", (97 * 31 + 0xD83D) * 31 * 31 + 0xDE00 * 31 + 98),
        ("\ud800", 0xD800),  # a lone surrogate counts as itself
    ],
)
def test_known_values(hashes: Hashes, text: str, expected: int) -> None:
    assert hashes.java_string_hash(text) == expected
    assert reference_hash(text) == expected


@given(st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())))
def test_matches_reference_for_any_string(hashes: Hashes, text: str) -> None:
    value = hashes.java_string_hash(text)
    assert value == reference_hash(text)
    assert -(2**31) <= value < 2**31


@given(st.text(st.characters(max_codepoint=127)))
def test_ascii_fast_path_matches_reference(hashes: Hashes, text: str) -> None:
    assert hashes.java_string_hash(text) == reference_hash(text)


def test_tags_code() -> None:
    assert tags_code(None) == 0
    assert tags_code("") == 0
    assert tags_code("TagA") == 2598919
    assert tags_code("polygenelubricants") == -(2**31)  # negative values stay signed


def test_index_key_hash(hashes: Hashes) -> None:
    assert index_key("TopicTest", "k1") == "TopicTest#k1"
    assert hashes.index_key_hash("polygenelubricants") == 0  # abs(MIN_VALUE) maps to 0
    assert hashes.index_key_hash("TagA") == 2598919
    negative = "hello world!"  # hashCode is negative
    assert hashes.java_string_hash(negative) < 0
    assert hashes.index_key_hash(negative) == -hashes.java_string_hash(negative)


@given(st.text())
def test_index_key_hash_is_non_negative(hashes: Hashes, key: str) -> None:
    value = hashes.index_key_hash(key)
    assert 0 <= value < 2**31
    assert value == reference_index_hash(key)


@given(st.lists(st.text(max_size=60), max_size=30))
def test_index_key_hashes_equal_the_scalar_hash(hashes: Hashes, keys: list[str]) -> None:
    """Empty keys, long keys, non-ASCII (the scalar fallback) and surrogates alike."""
    assert hashes.index_key_hashes(keys).tolist() == [reference_index_hash(k) for k in keys]
    assert hashes.index_key_hashes(tuple(keys)).tolist() == [reference_index_hash(k) for k in keys]


@given(st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=300), max_size=30))
def test_index_key_hashes_vectorised_ascii_path(hashes: Hashes, keys: list[str]) -> None:
    """All-ASCII batches take the numpy path; keys longer than any seen grow the table."""
    assert hashes.index_key_hashes(keys).tolist() == [reference_index_hash(k) for k in keys]


def test_index_key_hashes_min_value_maps_to_zero(hashes: Hashes) -> None:
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE (a well-known Java example).
    assert hashes.java_string_hash("polygenelubricants") == -(2**31)
    assert hashes.index_key_hashes(["polygenelubricants", "a"]).tolist() == [0, 97]
    assert hashes.index_key_hashes([]).tolist() == []


def test_tag_hash_binds_the_kernel_when_built() -> None:
    kernel = None if extensions_disabled() else kernel_or_skip("aiorocketmq.common._hash_kernels")
    if kernel is None:
        assert tag_hash.java_string_hash is tag_hash.py_java_string_hash
    else:
        assert tag_hash.java_string_hash is kernel.java_string_hash
        assert tag_hash.index_key_hash is kernel.index_key_hash
