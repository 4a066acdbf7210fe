"""extFields typed reads follow Java's parse rules and RocketMQ's error remarks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.errors import HeaderFieldError
from aiorocketmq.remoting.headers import (
    ext_bool,
    ext_int,
    ext_long,
    ext_opt_int,
    ext_opt_long,
    ext_opt_str,
    ext_str,
    to_ext_fields,
)


def test_missing_required_field_has_javas_remark() -> None:
    with pytest.raises(HeaderFieldError) as info:
        ext_str({}, "topic")
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.remark == "the custom field <topic> is null"


def test_defaults_apply_only_when_absent() -> None:
    assert ext_int({}, "queueId", -1) == -1
    assert ext_int({"queueId": "3"}, "queueId", -1) == 3
    assert ext_str({}, "remark", "") == ""
    assert ext_opt_str({}, "x") is None
    assert ext_opt_int({}, "x") is None
    assert ext_opt_long({"x": "9"}, "x") == 9


@pytest.mark.parametrize("text", ["1.0", "1_000", " 1", "", "0x10", "١٢"])
def test_ints_reject_what_java_rejects(text: str) -> None:
    with pytest.raises(HeaderFieldError):
        ext_int({"n": text}, "n")


def test_int_and_long_ranges() -> None:
    assert ext_int({"n": str(2**31 - 1)}, "n") == 2**31 - 1
    with pytest.raises(HeaderFieldError):
        ext_int({"n": str(2**31)}, "n")
    assert ext_long({"n": str(2**31)}, "n") == 2**31
    assert ext_long({"n": "-9223372036854775808"}, "n") == -(2**63)
    with pytest.raises(HeaderFieldError):
        ext_long({"n": str(2**63)}, "n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("true", True), ("TRUE", True), ("1", True), ("false", False), ("0", False)],
)
def test_booleans_accept_cpp_digits(text: str, expected: bool) -> None:
    # C++ 1.2.x sends batch/unitMode as "0"/"1" (vectors README quirk 3).
    assert ext_bool({"batch": text}, "batch") is expected


def test_bad_boolean_is_an_error_not_false() -> None:
    with pytest.raises(HeaderFieldError):
        ext_bool({"batch": "yes"}, "batch")


def test_to_ext_fields_writes_strings_only() -> None:
    fields = to_ext_fields(queueId=1, queueOffset=2**40, ok=True, off=False, missing=None, s="x")
    assert fields == {
        "queueId": "1",
        "queueOffset": "1099511627776",
        "ok": "true",
        "off": "false",
        "s": "x",
    }
    assert all(type(v) is str for v in fields.values())


@given(st.integers(-(2**63), 2**63 - 1))
def test_long_round_trip(value: int) -> None:
    assert ext_long(to_ext_fields(v=value), "v") == value
