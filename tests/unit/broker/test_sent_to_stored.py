"""``sent_to_stored``: the edited string equals the join of the parsed map, always."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from aiorocketmq.broker.stored_copy import join_properties, sent_to_stored
from aiorocketmq.common.properties import MessageConst, py_string_to_properties

_NAMES = st.sampled_from(["WAIT", "CLUSTER", "KEYS", "TAGS", "UNIQ_KEY", "a", "WAITX", "XWAIT"])
_VALUES = st.sampled_from(["true", "false", "", "v", "x\x01y", "WAIT\x01true", "c1"])
_SEGMENTS = st.one_of(
    st.builds(lambda n, v: f"{n}\x01{v}", _NAMES, _VALUES),
    st.sampled_from(["", "\x01", "n", "\x01v", "WAIT", "WAIT\x01"]),
    st.text(alphabet="ab\x01\x02WAIT", max_size=6),
)


def _reference(text: str, cluster: str) -> tuple[str, dict[str, str]]:
    props = py_string_to_properties(text)
    props[MessageConst.PROPERTY_CLUSTER] = cluster
    stored = {k: v for k, v in props.items() if k != MessageConst.PROPERTY_WAIT_STORE_MSG_OK}
    return join_properties(stored), props


@given(
    segments=st.lists(_SEGMENTS, max_size=6),
    trailing=st.booleans(),
    cluster=st.sampled_from(["DefaultCluster", "", "c\x01d"]),
)
@example(segments=["WAIT\x01true"], trailing=True, cluster="DefaultCluster")
@example(segments=["KEYS\x01k", "WAIT\x01true", "TAGS\x01t"], trailing=True, cluster="C")
@example(segments=["WAIT\x01true", "WAIT\x01false"], trailing=False, cluster="C")
@example(segments=["", "KEYS\x01k"], trailing=False, cluster="C")
@example(segments=["KEYS\x01k", "CLUSTER\x01old"], trailing=True, cluster="C")
@example(segments=["XWAIT\x01true", "WAIT\x01true"], trailing=False, cluster="C")
@settings(max_examples=1500, deadline=None)
def test_sent_to_stored_equals_the_join(segments: list[str], trailing: bool, cluster: str) -> None:
    text = "\x02".join(segments) + ("\x02" if trailing and segments else "")
    expected, expected_props = _reference(text, cluster)
    props = py_string_to_properties(text)
    assert sent_to_stored(text, props, cluster) == expected
    assert list(props.items()) == list(expected_props.items())
