"""Findings of the fuzzers, pinned: each input once escaped as an untyped exception.

Both were Python's 4,300-digit limit on ``int()`` of a decimal string, which raises
``ValueError`` rather than a parse error: in the extFields readers (``ext_int`` /
``ext_long`` / their optional forms) and in ``fastjson.loads`` (a JSON number that
long is not a ``JSONDecodeError``).
"""

from __future__ import annotations

import pytest

from aiorocketmq.common import fastjson
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.protocol_bodies import HeartbeatData
from aiorocketmq.remoting.errors import HeaderFieldError
from aiorocketmq.remoting.headers import ext_int, ext_long, ext_opt_int, ext_opt_long

pytestmark = pytest.mark.fuzz

LONG_DIGITS = ["9" * 4301, "-" + "1" * 5000, "+" + "2" * 4400, "9" * 20]


@pytest.mark.parametrize("reader", [ext_int, ext_long, ext_opt_int, ext_opt_long])
@pytest.mark.parametrize("value", LONG_DIGITS)
def test_ext_readers_reject_long_digit_runs_as_out_of_range(reader: object, value: str) -> None:
    with pytest.raises(HeaderFieldError, match=r"<queueOffset> is out of .* range"):
        reader({"queueOffset": value}, "queueOffset")  # type: ignore[operator]


@pytest.mark.parametrize("reader", [ext_int, ext_long])
def test_leading_zeros_still_parse_as_java_does(reader: object) -> None:
    assert reader({"f": "0" * 4400 + "42"}, "f") == 42  # type: ignore[operator]
    assert reader({"f": "-" + "0" * 30 + "7"}, "f") == -7  # type: ignore[operator]


@pytest.mark.parametrize(
    "text",
    ["1" * 4301, '{"a":' + "9" * 5000 + "}", "{0:" + "1" * 4400 + "}", "[-" + "3" * 4301 + "]"],
)
def test_fastjson_rejects_huge_numbers_as_protocol_errors(text: str) -> None:
    with pytest.raises(RemoteProtocolError, match="not JSON"):
        fastjson.loads(text)


def test_heartbeat_with_a_huge_number_is_a_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError):
        HeartbeatData.decode(b'{"clientID":"c","producerDataSet":[' + b"7" * 4500 + b"]}")
