"""The client's direct SEND_MESSAGE_V2 field builder matches the header's own encoding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.mq_client_api import send_fields_v2
from aiorocketmq.remoting.broker_headers import SendMessageRequestHeader

_TEXT = st.text(min_size=1, max_size=20)
_INT = st.integers(min_value=-(2**63), max_value=2**63 - 1)

HEADERS = st.builds(
    SendMessageRequestHeader,
    producer_group=_TEXT,
    topic=_TEXT,
    default_topic=_TEXT,
    default_topic_queue_nums=_INT,
    queue_id=_INT,
    sys_flag=_INT,
    born_timestamp=_INT,
    flag=_INT,
    properties=st.none() | st.text(max_size=40),
    reconsume_times=st.none() | _INT,
    unit_mode=st.booleans(),
    batch=st.booleans(),
    max_reconsume_times=st.none() | _INT,
    broker_name=st.none() | _TEXT,
)


@given(HEADERS)
def test_same_keys_order_and_strings_as_to_ext_fields_v2(header: SendMessageRequestHeader) -> None:
    fields = send_fields_v2(header)
    expected = header.to_ext_fields_v2()
    assert fields == expected
    assert list(fields) == list(expected)  # key order reaches the wire (JSON/msgpack)


def test_a_typical_send_header() -> None:
    header = SendMessageRequestHeader(
        "pg",
        "T",
        "TBW102",
        4,
        2,
        0,
        1_700_000_000_000,
        0,
        "UNIQ_KEY\x01U\x02",
        0,
        False,
        False,
        None,
        "broker-a",
    )
    assert send_fields_v2(header) == {
        "a": "pg",
        "b": "T",
        "c": "TBW102",
        "d": "4",
        "e": "2",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "UNIQ_KEY\x01U\x02",
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }
