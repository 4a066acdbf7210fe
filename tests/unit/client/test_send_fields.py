"""The client's direct SEND_MESSAGE_V2 field builder matches the header's own encoding,
and its C twin matches it for any arguments."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.mq_client_api import send_fields_v2, v2_fields
from aiorocketmq.remoting.broker_headers import SendMessageRequestHeader
from tests.support.kernels import kernel_or_skip

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


_ANY = st.none() | st.booleans() | _INT | st.text(max_size=8) | st.floats(allow_nan=False)


@given(HEADERS)
def test_the_kernel_gives_the_header_s_fields(header: SendMessageRequestHeader) -> None:
    kernel = kernel_or_skip("aiorocketmq.client._produce_kernels")
    fields = kernel.v2_fields(
        header.producer_group, header.topic, header.default_topic,
        header.default_topic_queue_nums, header.queue_id, header.sys_flag,
        header.born_timestamp, header.flag, header.properties, header.reconsume_times,
        header.unit_mode, header.batch, header.max_reconsume_times, header.broker_name,
    )  # fmt: skip
    expected = header.to_ext_fields_v2()
    assert fields == expected
    assert list(fields) == list(expected)


@given(st.lists(_ANY, min_size=14, max_size=14))
def test_the_kernel_equals_the_reference_for_any_values(values: list[object]) -> None:
    """Whatever a caller passes (a bool for a count, a number for a flag), both give
    the same keys, order and strings."""
    kernel = kernel_or_skip("aiorocketmq.client._produce_kernels")
    fields = kernel.v2_fields(*values)
    expected = v2_fields(*values)  # type: ignore[arg-type]
    assert fields == expected
    assert list(fields) == list(expected)
