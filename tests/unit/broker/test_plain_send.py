"""``plain_send_fields``: the C twin against the reference, and what counts as plain."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.broker.plain_send import (
    LONG_NAMES,
    V2_NAMES,
    PlainSendReader,
    fields_reader,
    py_plain_send_fields,
)
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip, use_send_kernel

CLUSTER = "DefaultCluster"
LIMIT = 32_767
WAIT = "WAIT\x01true"
TAGS = "TAGS\x01TagA"
KEYS = "KEYS\x01order-1 order-2"
WIDE = "TAGS\x01a\x01b\x02K\x01\u00e9\U0001f600"


def _fields(properties: str | None = f"{TAGS}\x02{WAIT}", **extra: str) -> dict[str, str]:
    fields = {
        "a": "PID_test", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "1", "f": "0",
        "g": "1700000000000", "h": "0", "j": "0", "k": "false", "m": "false", "n": "broker-a",
    }  # fmt: skip
    if properties is not None:
        fields["i"] = properties
    fields.update(extra)
    return fields


_LONG = {**dict(zip(V2_NAMES, LONG_NAMES, strict=True)), "n": "brokerName"}
NAMES = pytest.mark.parametrize("names", [V2_NAMES, LONG_NAMES], ids=["v2", "long"])


def _named(fields: dict[str, str], names: tuple[str, ...]) -> dict[str, str]:
    """``fields`` by SEND_MESSAGE's long names when ``names`` are those."""
    return fields if names == V2_NAMES else {_LONG.get(k, k): v for k, v in fields.items()}


def _reader(implementation: str, monkeypatch: pytest.MonkeyPatch) -> PlainSendReader:
    use_send_kernel(implementation, monkeypatch)
    return fields_reader()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    ("properties", "stored"),
    [
        (f"{WAIT}\x02{TAGS}", f"{TAGS}\x02CLUSTER\x01{CLUSTER}"),  # WAIT first
        (f"{TAGS}\x02{WAIT}\x02{KEYS}", f"{TAGS}\x02{KEYS}\x02CLUSTER\x01{CLUSTER}"),
        (f"{TAGS}\x02{WAIT}", f"{TAGS}\x02CLUSTER\x01{CLUSTER}"),  # WAIT last
        (f"{TAGS}\x02{WAIT}\x02", f"{TAGS}\x02CLUSTER\x01{CLUSTER}"),  # and a trailing \x02
        (WAIT, f"CLUSTER\x01{CLUSTER}"),  # WAIT alone
        (f"{TAGS}\x02", f"{TAGS}\x02CLUSTER\x01{CLUSTER}"),  # no WAIT
        ("", f"CLUSTER\x01{CLUSTER}"),
        (None, f"CLUSTER\x01{CLUSTER}"),
        (WIDE, f"{WIDE}\x02CLUSTER\x01{CLUSTER}"),  # \x01 in a value, non-ASCII
    ],
)  # fmt: skip
@NAMES
def test_the_stored_properties_are_the_general_paths(
    implementation: str, monkeypatch: pytest.MonkeyPatch, properties: str | None, stored: str,
    names: tuple[str, ...],
) -> None:  # fmt: skip
    read = _reader(implementation, monkeypatch)
    fields = _fields(properties, e="3", f="2", g="1700000000123", h="5", j="2")
    got = read(_named(fields, names), CLUSTER, LIMIT, names)
    assert got is not None
    assert got[:6] == ("TopicTest", 3, 2, 1_700_000_000_123, 5, 2)
    assert got[7] == stored
    assert got[6]["CLUSTER"] == CLUSTER and list(got[6])[-1] == "CLUSTER"


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize(
    "fields",
    [
        _fields(f"{TAGS}\x02TRAN_MSG\x01true"),
        _fields(f"{TAGS}\x02DELAY\x013"),
        _fields(f"{TAGS}\x02CLUSTER\x01theirs"),
        _fields(f"{TAGS}\x02TIMER_DELAY_SEC\x0110"),
        _fields(m="true"),  # a batch
        _fields(m="1"),
        _fields(e="x"),  # the general path words the refusal
        {k: v for k, v in _fields().items() if k != "b"},
        _fields("K\x01" + "v" * (LIMIT // 4)),  # may pass maxPropertiesSize
    ],
)
@NAMES
def test_not_plain(
    implementation: str, monkeypatch: pytest.MonkeyPatch, fields: dict[str, str],
    names: tuple[str, ...],
) -> None:  # fmt: skip
    read = _reader(implementation, monkeypatch)
    assert read(_named(fields, names), CLUSTER, LIMIT, names) is None


def test_a_header_read_by_the_other_kind_of_names_is_not_plain() -> None:
    """A SEND_MESSAGE with one-letter fields (or the reverse) has none of the names read:
    the general path answers it, as Java's decoding of that code would."""
    kernel = kernel_or_skip("aiorocketmq.broker._send_kernels")
    for read in (py_plain_send_fields, kernel.plain_send_fields):
        assert read(_fields(), CLUSTER, LIMIT, LONG_NAMES) is None
        assert read(_named(_fields(), LONG_NAMES), CLUSTER, LIMIT, V2_NAMES) is None
    with pytest.raises(ValueError, match="13"):
        kernel.plain_send_fields(_fields(), CLUSTER, LIMIT, ("a", "b"))


def test_the_c_twin_declines_what_is_not_in_its_usual_form() -> None:
    """Each of these the reference takes (the general path's form); the twin leaves it."""
    kernel = kernel_or_skip("aiorocketmq.broker._send_kernels")
    for fields in (
        _fields(f"{TAGS}\x02{TAGS}"),  # a name twice
        _fields(f"{TAGS}\x02junk"),  # a segment that is no pair
        _fields(f"{TAGS}\x02\x02{WAIT}"),  # an empty segment
        _fields(k="TRUE"),  # a boolean Java reads, in an unusual spelling
    ):
        assert py_plain_send_fields(fields, CLUSTER, LIMIT, V2_NAMES) is not None, fields
        assert kernel.plain_send_fields(fields, CLUSTER, LIMIT, V2_NAMES) is None, fields


_names = st.sampled_from(["TAGS", "KEYS", "WAIT", "UNIQ_KEY", "DELAY", "TIMER_X", "a", ""])
_chars = st.sampled_from(["a", "1", " ", "\x01", "\u00e9", "\ud800", "\U0001f600"])
_values = st.text(alphabet=_chars, max_size=4)
_segments = st.tuples(_names, st.sampled_from(["\x01", ""]), _values).map("".join)
_props = st.lists(_segments, max_size=5).map("\x02".join) | st.text(max_size=12)
_digits = st.sampled_from(["0", "7", "123456789", "1234567890", "", "-1", "+1", "\u0661", "0x1"])
_bools = st.sampled_from(["false", "true", "0", "1", "TRUE", "yes"])


@st.composite
def _any_fields(draw: st.DrawFn) -> dict[str, str]:
    fields = _fields(draw(st.none() | _props))
    for key in ("d", "e", "f", "h", "j", "l"):
        if draw(st.booleans()):
            fields[key] = draw(_digits)
    if draw(st.booleans()):
        fields["g"] = draw(st.sampled_from(["1700000000000", "123456789012345678", "1" * 19]))
    for key in ("k", "m"):
        if draw(st.booleans()):
            fields[key] = draw(_bools)
    if draw(st.booleans()):
        del fields[draw(st.sampled_from(sorted(fields)))]
    if draw(st.booleans()):
        fields["i" if draw(st.booleans()) else "e"] = draw(st.integers(0, 3))  # type: ignore[assignment]
    return fields


@settings(max_examples=600, deadline=None)
@given(_any_fields(), st.sampled_from([LIMIT, 16, 0]), st.sampled_from([V2_NAMES, LONG_NAMES]))
def test_the_c_twin_returns_what_the_reference_does_or_declines(
    fields: dict[str, str], limit: int, names: tuple[str, ...]
) -> None:
    kernel = kernel_or_skip("aiorocketmq.broker._send_kernels")
    fields = _named(fields, names)
    got = kernel.plain_send_fields(fields, CLUSTER, limit, names)
    if got is not None:
        assert got == py_plain_send_fields(fields, CLUSTER, limit, names)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(_names.filter(bool), st.text(alphabet=_chars, min_size=1, max_size=4)),
        max_size=6,
        unique_by=lambda pair: pair[0],
    )
)
def test_the_c_twin_takes_every_plain_send_in_its_usual_form(
    pairs: list[tuple[str, str]],
) -> None:
    kernel = kernel_or_skip("aiorocketmq.broker._send_kernels")
    fields = _fields("\x02".join(f"{n}\x01{v}" for n, v in pairs))
    expected = py_plain_send_fields(fields, CLUSTER, LIMIT, V2_NAMES)
    assert kernel.plain_send_fields(fields, CLUSTER, LIMIT, V2_NAMES) == expected
    long_fields = _named(fields, LONG_NAMES)
    assert kernel.plain_send_fields(long_fields, CLUSTER, LIMIT, LONG_NAMES) == expected
    plain = not {"DELAY", "TIMER_X"} & {n for n, _ in pairs}
    assert (expected is not None) is plain
