"""Message properties: names, the \\x01/\\x02 string form, and 4.9.8 parsing rules.

The parsing tests run on both the pure-Python reference and the C kernel
(``_props_kernels.pyx``), through the ``parse`` fixture.
"""

from __future__ import annotations

from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common import properties
from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.common.kernels import extensions_disabled
from aiorocketmq.common.properties import (
    SYSTEM_PROPERTY_NAMES,
    MessageConst,
    properties_to_string,
)
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip

Parse = Callable[[str], dict[str, str]]


def _implementation(side: str, name: str) -> Any:
    """``properties.py_<name>`` ("python"), or the kernel's ``<name>``, which
    ``properties`` must have bound ("c")."""
    if side == "python":
        return getattr(properties, f"py_{name}")
    kernel = kernel_or_skip("aiorocketmq.common._props_kernels")
    assert getattr(properties, name) is getattr(kernel, name)
    return getattr(kernel, name)


@pytest.fixture(params=IMPLEMENTATIONS, scope="module")
def parse(request: pytest.FixtureRequest) -> Parse:
    parsed: Parse = _implementation(request.param, "string_to_properties")
    return parsed


def test_properties_binds_the_kernel_unless_disabled() -> None:
    if extensions_disabled():
        assert properties.string_to_properties is properties.py_string_to_properties
    else:
        kernel = kernel_or_skip("aiorocketmq.common._props_kernels")
        assert properties.string_to_properties is kernel.string_to_properties


# The names listed in specs/remoting.md §6.4 (MessageConst 4.9.x), in order.
SPEC_NAMES = [
    "KEYS",
    "TAGS",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "TRAN_MSG",
    "PGROUP",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "BUYER_ID",
    "ORIGIN_MESSAGE_ID",
    "TRANSFER_FLAG",
    "CORRECTION_FLAG",
    "MQ2_FLAG",
    "RECONSUME_TIME",
    "MSG_REGION",
    "TRACE_ON",
    "UNIQ_KEY",
    "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME",
    "TRAN_PREPARED_QUEUE_OFFSET",
    "TRANSACTION_CHECK_TIMES",
    "CHECK_IMMUNITY_TIME_IN_SECONDS",
    "INSTANCE_ID",
    "CORRELATION_ID",
    "REPLY_TO_CLIENT",
    "TTL",
    "ARRIVE_TIME",
    "PUSH_REPLY_TIME",
    "CLUSTER",
    "MSG_TYPE",
    "INNER_MULTI_DISPATCH",
    "INNER_MULTI_QUEUE_OFFSET",
]


def java_string2message_properties(text: str) -> dict[str, str]:
    """A literal port of RocketMQ 4.9.8 ``MessageDecoder.string2messageProperties``."""
    result: dict[str, str] = {}
    length = len(text)
    index = 0
    while index < length:
        new_index = text.find("\x02", index)
        if new_index < 0:
            new_index = length
        if new_index - index >= 3:
            kv_sep = text.find("\x01", index)
            if index < kv_sep < new_index - 1:
                result[text[index:kv_sep]] = text[kv_sep + 1 : new_index]
        index = new_index + 1
    return result


def test_message_const_covers_every_spec_name() -> None:
    values = [
        getattr(MessageConst, attr) for attr in dir(MessageConst) if attr.startswith("PROPERTY_")
    ]
    assert sorted(values) == sorted(SPEC_NAMES)
    assert MessageConst.PROPERTY_WAIT_STORE_MSG_OK == "WAIT"
    assert MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert MessageConst.PROPERTY_TRACE_SWITCH == "TRACE_ON"
    assert MessageConst.KEY_SEPARATOR == " "


def test_system_names_are_java_string_hash_set() -> None:
    # 4.9.x leaves these four out, so users may set them (LMQ uses INNER_MULTI_DISPATCH).
    left_out = {
        "INNER_MULTI_DISPATCH",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TRANSACTION_CHECK_TIMES",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
    }
    assert frozenset(SPEC_NAMES) - left_out == SYSTEM_PROPERTY_NAMES
    assert "TAGS" in SYSTEM_PROPERTY_NAMES and "UNIQ_KEY" in SYSTEM_PROPERTY_NAMES


def test_serialise_without_trailing_separator() -> None:
    assert properties_to_string({}) == ""
    assert properties_to_string({"TAGS": "TagA"}) == "TAGS\x01TagA"
    assert (
        properties_to_string({"TAGS": "TagA", "KEYS": "k1 k2"}) == "TAGS\x01TagA\x02KEYS\x01k1 k2"
    )


@pytest.mark.parametrize(
    "props",
    [
        {"a\x01": "v"},
        {"a": "v\x01w"},
        {"a\x02b": "v"},
        {"a": "v\x02"},
        {"": "v"},
        {"a": ""},
        {"ok": "fine", "bad": "x\x02y"},
    ],
)
def test_serialise_rejects_what_the_reader_would_misread(props: dict[str, str]) -> None:
    with pytest.raises(LocalProtocolError):
        properties_to_string(props)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("TAGS\x01TagA", {"TAGS": "TagA"}),
        ("TAGS\x01TagA\x02", {"TAGS": "TagA"}),  # 4.9.0 / client trailing separator
        ("TAGS\x01TagA\x02KEYS\x01k", {"TAGS": "TagA", "KEYS": "k"}),
        ("a\x01b\x02\x02c\x01d", {"a": "b", "c": "d"}),  # empty segment
        ("\x01v", {}),  # empty name
        ("k\x01", {}),  # empty value
        ("ab", {}),  # shorter than 3 and no separator
        ("abc", {}),  # no \x01
        ("k\x01v\x01w", {"k": "v\x01w"}),  # the name ends at the first \x01
        ("k\x011\x02k\x012", {"k": "2"}),  # the later duplicate wins
        ("kk\x02\x01v", {}),  # the \x01 of a later segment does not count
        ("\x02\x02\x02", {}),
    ],
)
def test_parse_follows_4_9_8_rules(parse: Parse, text: str, expected: dict[str, str]) -> None:
    assert parse(text) == expected
    assert java_string2message_properties(text) == expected


_ALPHABET = st.sampled_from(["a", "b", "\x01", "\x02", "é", "😀", " "])


@given(st.lists(_ALPHABET, max_size=30).map("".join))
def test_parse_matches_a_literal_port_of_java(parse: Parse, text: str) -> None:
    assert parse(text) == java_string2message_properties(text)


@given(st.text())
def test_parse_never_raises(parse: Parse, text: str) -> None:
    assert isinstance(parse(text), dict)


_NAME = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x01\x02"),
    min_size=1,
    max_size=10,
)


@given(st.dictionaries(_NAME, _NAME, max_size=8), st.booleans())
def test_round_trip(parse: Parse, props: dict[str, str], trailing: bool) -> None:
    text = properties_to_string(props)
    assert not text.endswith("\x02")
    assert parse(text + ("\x02" if trailing and text else "")) == props


Peek = Callable[[str, str], "str | None"]


@pytest.fixture(params=IMPLEMENTATIONS, scope="module")
def peek(request: pytest.FixtureRequest) -> Peek:
    peeked: Peek = _implementation(request.param, "peek_property")
    return peeked


_PEEK_NAMES = st.sampled_from(["a", "ab", "b", "é😀", "", "a\x01", "\x02a", " "])


@settings(max_examples=500)
@given(st.lists(_ALPHABET, max_size=30).map("".join), _PEEK_NAMES)
def test_peek_gives_the_parsed_value_or_defers_to_the_parse(
    peek: Peek, text: str, name: str
) -> None:
    """One name's value without the map: what the parse gives, or "" (and only when
    the parse has to decide: the last segment of that name is empty, or the name
    holds a separator); never a wrong answer."""
    want = java_string2message_properties(text).get(name)
    got = peek(text, name)
    if got == "":
        last = [s for s in text.split("\x02") if s.partition("\x01")[0] == name and "\x01" in s]
        assert ("\x01" in name or "\x02" in name) or (last and last[-1] == name + "\x01")
    else:
        assert got == want


Select = Callable[[str, tuple[str, ...]], "tuple[str | None, ...]"]


@pytest.fixture(params=IMPLEMENTATIONS, scope="module")
def select(request: pytest.FixtureRequest) -> Select:
    selected: Select = _implementation(request.param, "select_properties")
    return selected


@settings(max_examples=500)
@given(
    st.lists(_ALPHABET, max_size=30).map("".join),
    st.lists(_PEEK_NAMES, max_size=8).map(tuple),
)
def test_select_gives_the_parsed_values(select: Select, text: str, names: tuple[str, ...]) -> None:
    """The dispatcher's three values of a record without the map: for each name what
    Java's parse gives (a later duplicate wins, an empty value does not count), None
    for a name it lacks, whatever the names hold."""
    parsed = java_string2message_properties(text)
    assert select(text, names) == tuple(parsed.get(name) for name in names)


def test_select_takes_at_most_eight_names(select: Select) -> None:
    with pytest.raises(ValueError, match="at most 8"):
        select("a\x01b", tuple("abcdefghi"))


_ANY_TEXT = st.text(alphabet=st.sampled_from("ab\x01\x02\u00e9\U0001f600 "), max_size=6)


@given(st.dictionaries(_ANY_TEXT, _ANY_TEXT, max_size=6))
def test_the_serialiser_twin_gives_the_reference_string_or_defers(props: dict[str, str]) -> None:
    """The C twin answers the reference's string, or None where the reference decides
    (a refusal, with its words); it never declines a map the reference serialises."""
    kernel = kernel_or_skip("aiorocketmq.common._props_kernels")
    got = kernel.properties_to_string(props)
    try:
        want: str | None = properties.py_properties_to_string(props)
    except LocalProtocolError:
        want = None
    assert got == want
    if want is not None:
        assert properties_to_string(props) == want


def test_the_serialiser_twin_leaves_odd_inputs_to_the_reference() -> None:
    kernel = kernel_or_skip("aiorocketmq.common._props_kernels")
    assert kernel.properties_to_string(MappingProxyType({"a": "b"})) is None
    assert kernel.properties_to_string({"a": 1}) is None
    assert properties_to_string(MappingProxyType({"a": "b"})) == "a\x01b"
