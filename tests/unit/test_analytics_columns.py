"""The analytics properties parser, vectorized over a whole batch, against the codec's
``string_to_properties`` (Java's ``string2messageProperties`` rules) row by row."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow", reason="the analytics extra is not installed")

from aiorocketmq.analytics.columns import properties_columns  # noqa: E402
from aiorocketmq.common.properties import string_to_properties  # noqa: E402

# Separators, names the columns look up, a space (the KEYS separator) and non-ASCII.
_PIECES = st.sampled_from(
    ["\x01", "\x02", "\x02", "a", "b", "é", "中", " ", "KEYS", "TAGS", "UNIQ_KEY", "k1"]
)
_TEXT = st.lists(_PIECES, max_size=14).map("".join)


def _expected(text: str) -> tuple[list[tuple[str, str]], str | None, list[str], str | None]:
    props = string_to_properties(text)
    keys = [k for k in props.get("KEYS", "").split(" ") if k]
    return list(props.items()), props.get("TAGS"), keys, props.get("UNIQ_KEY")


def _check(texts: list[str], array: pa.Array) -> None:
    cols = properties_columns(array)
    assert len(cols["properties"]) == len(texts)
    got = zip(
        cols["properties"].to_pylist(), cols["tags"].to_pylist(), cols["keys"].to_pylist(),
        cols["uniqKey"].to_pylist(), strict=True,
    )  # fmt: skip
    for text, row in zip(texts, got, strict=True):
        assert row == _expected(text), repr(text)


@settings(deadline=None)  # the first call loads pyarrow.compute kernels
@given(st.lists(_TEXT, max_size=12))
def test_every_row_parses_as_the_codec_does(texts: list[str]) -> None:
    _check(texts, pa.array(texts, pa.string()))


@settings(deadline=None)
@given(st.lists(_TEXT, min_size=2, max_size=8))
def test_a_sliced_array_parses_from_its_own_offset(texts: list[str]) -> None:
    _check(texts[1:], pa.array(texts, pa.string()).slice(1))


def test_java_client_properties_and_edge_rows() -> None:
    texts = [
        "KEYS\x01order-1 user-7\x02TAGS\x01TagA\x02UNIQ_KEY\x01AB12\x02WAIT\x01true\x02",
        "",  # no properties at all
        "TAGS\x01x\x02TAGS\x01y",  # a repeated name: first place, last value
        "\x01v\x02n\x01\x02\x02x",  # empty name, empty value, empty segment, no separator
        "KEYS\x01  \x02",  # KEYS of spaces only: no keys, never null
        "a\x01b\x01c",  # later \x01s belong to the value
    ]
    _check(texts, pa.array(texts, pa.string()))
    cols = properties_columns(pa.array(texts, pa.string()))
    assert cols["properties"].to_pylist()[2] == [("TAGS", "y")]
    assert cols["keys"].to_pylist()[4] == [] and cols["keys"].null_count == 0
