"""fastjson's text: the bare-integer-key writer, the tolerant reader, the field readers.

The reader must take what a Java name server sends clients before 4.9.4
(``{0:"ip:port"}``) and must never touch text inside string values.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common import fastjson
from aiorocketmq.common.errors import RemoteProtocolError

pytestmark = pytest.mark.timeout(30)

json_leaves = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.text(max_size=20)
json_values = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(-5, 5), children, max_size=4)
    ),
    max_leaves=20,
)


def _with_str_keys(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _with_str_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_str_keys(v) for v in value]
    return value


def test_bare_integer_keys_as_fastjson_writes_them() -> None:
    value = {"brokerAddrs": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}, "name": "a"}
    text = fastjson.dumps(value, unquoted_int_keys=True)
    assert text == '{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"name":"a"}'
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # really not JSON: the point of the tolerant reader
    assert fastjson.loads(text) == {
        "brokerAddrs": {"0": "127.0.0.1:10911", "1": "127.0.0.1:10921"},
        "name": "a",
    }


def test_standard_form_quotes_integer_keys() -> None:
    text = fastjson.dumps({"m": {0: "x"}, "e": {}, "l": []})
    assert text == '{"m":{"0":"x"},"e":{},"l":[]}'
    assert json.loads(text) == {"m": {"0": "x"}, "e": {}, "l": []}


def test_empty_containers_and_leaves_in_bare_form() -> None:
    assert fastjson.dumps({"a": {}, "b": [], "c": [1, None, True]}, unquoted_int_keys=True) == (
        '{"a":{},"b":[],"c":[1,null,true]}'
    )


def test_ascii_only_escapes_like_browser_compatible() -> None:
    assert fastjson.dumps({"t": "é"}, ascii_only=True) == '{"t":"\\u00e9"}'
    assert fastjson.dumps({"t": "é"}) == '{"t":"é"}'


def test_reader_leaves_look_alikes_inside_strings_alone() -> None:
    text = '{"remark":"{0:\\"x\\", 1:2}","m":{ -3 :"neg", 7: "seven"}}'
    assert fastjson.loads(text) == {"remark": '{0:"x", 1:2}', "m": {"-3": "neg", "7": "seven"}}


def test_reader_takes_bytes_and_trailing_newline() -> None:
    assert fastjson.loads(b'{"a":{0:"b"}}\n') == {"a": {"0": "b"}}
    assert fastjson.loads(memoryview(b"[1,2]")) == [1, 2]


@pytest.mark.parametrize(
    "bad",
    [b"", b"{", b"\xff\xfe", b'{"a":}', b"{0:1", b"nope", b"[" * 100_000],
)
def test_reader_raises_only_remote_protocol_error(bad: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        fastjson.loads(bad)


@given(json_values)
def test_both_forms_read_back_to_the_same_value(value: object) -> None:
    expected = _with_str_keys(value)
    assert fastjson.loads(fastjson.dumps(value)) == expected
    assert fastjson.loads(fastjson.dumps(value, unquoted_int_keys=True)) == expected


@given(st.binary(max_size=64))
def test_random_bytes_parse_or_raise_protocol_error(data: bytes) -> None:
    try:
        fastjson.loads(data)
    except RemoteProtocolError:
        pass


def test_field_readers_are_as_lenient_as_fastjson() -> None:
    d = {"n": "4", "m": 5, "s": 7, "b": "TRUE", "c": False, "l": None}
    assert fastjson.get_int(d, "n", 0) == 4
    assert fastjson.get_int(d, "m", 0) == 5
    assert fastjson.get_int(d, "missing", 9) == 9
    assert fastjson.get_str(d, "s") == "7"
    assert fastjson.get_bool(d, "b", False) is True
    assert fastjson.get_bool(d, "c", True) is False
    assert fastjson.get_opt_str(d, "l") is None
    assert fastjson.get_str_list(None, "l") == []


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fastjson.get_int({"n": "x"}, "n", 0), "expected an integer"),
        (lambda: fastjson.get_int({"n": True}, "n", 0), "expected an integer"),
        (lambda: fastjson.get_str({}, "s"), "is missing"),
        (lambda: fastjson.get_str({"s": [1]}, "s"), "expected a string"),
        (lambda: fastjson.get_bool({"b": "yes"}, "b", False), "expected a boolean"),
        (lambda: fastjson.get_str_list([1], "l"), "array of strings"),
        (lambda: fastjson.as_dict([], "X"), "expected a JSON object"),
        (lambda: fastjson.as_list({}, "X"), "expected a JSON array"),
        (lambda: fastjson.loads_object(b"[]", "Thing"), "Thing"),
    ],
)
def test_field_readers_name_the_problem(call: object, message: str) -> None:
    with pytest.raises(RemoteProtocolError, match=message):
        call()  # type: ignore[operator]


def test_dumps_pretty_is_fastjsons_prettyformat() -> None:
    text = fastjson.dumps_pretty({"offsetTable": {"T@g": {0: 250, 1: 3}, "x@y": {}}, "n": [1, "a"]})
    assert text == (
        '{\n\t"offsetTable":{\n\t\t"T@g":{0:250,1:3\n\t\t},\n\t\t"x@y":{}\n\t},\n\t"n":[1,"a"]\n}'
    )
    assert fastjson.loads(text)["offsetTable"]["T@g"] == {"0": 250, "1": 3}
