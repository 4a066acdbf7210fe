"""Broker headers: every client frame in the vectors parses; Java names, rules, round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.remoting.broker_admin_headers import (
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from aiorocketmq.remoting.broker_headers import (
    _SEND_LONG_NAMES,
    _SEND_V2_NAMES,
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    NotifyConsumerIdsChangedRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    TopicQueueRequestHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.remoting.errors import HeaderFieldError
from aiorocketmq.remoting.frame import decode_frame_payload
from tests.support.vectors import load_jsonl

pytestmark = pytest.mark.timeout(30)

_PARSERS: dict[int, Any] = {
    10: SendMessageRequestHeader.from_ext_fields,
    310: SendMessageRequestHeader.from_ext_fields_v2,
    320: SendMessageRequestHeader.from_ext_fields_v2,
    11: PullMessageRequestHeader.from_ext_fields,
    14: QueryConsumerOffsetRequestHeader.from_ext_fields,
    15: UpdateConsumerOffsetRequestHeader.from_ext_fields,
    35: UnregisterClientRequestHeader.from_ext_fields,
    36: ConsumerSendMsgBackRequestHeader.from_ext_fields,
    38: GetConsumerListByGroupRequestHeader.from_ext_fields,
    40: NotifyConsumerIdsChangedRequestHeader.from_ext_fields,
}

_REPLY_PARSERS: dict[int, Any] = {
    10: SendMessageResponseHeader.from_ext_fields,
    310: SendMessageResponseHeader.from_ext_fields,
    11: PullMessageResponseHeader.from_ext_fields,
}


def _frames(*, replies: bool) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for name in ("cpp_client.jsonl", "alions_client.jsonl"):
        for rec in load_jsonl(name):
            if replies:
                keep = rec["is_response"] and rec.get("reply_to_code") in _REPLY_PARSERS
                keep = keep and rec["code"] == 0
            else:
                keep = not rec["is_response"] and rec["code"] in _PARSERS
            if keep:
                out.append((f"{name}:{rec['seq']}:{rec['code_name']}", rec))
    return out


_REQUESTS = _frames(replies=False)
_REPLIES = _frames(replies=True)


def _decode(rec: dict[str, Any]) -> Any:
    return decode_frame_payload(bytes.fromhex(rec["frame_hex"])[4:])


def test_vectors_cover_every_client_code() -> None:
    codes = {rec["code"] for _, rec in _REQUESTS}
    assert codes == {10, 310, 11, 14, 15, 35, 36, 38, 40}


@pytest.mark.parametrize(("label", "rec"), _REQUESTS, ids=[label for label, _ in _REQUESTS])
def test_every_vector_request_parses(label: str, rec: dict[str, Any]) -> None:
    header = _PARSERS[rec["code"]](_decode(rec).ext_fields)
    again = type(header).from_ext_fields(header.to_ext_fields())
    assert again == header


@pytest.mark.parametrize(("label", "rec"), _REPLIES, ids=[label for label, _ in _REPLIES])
def test_every_vector_reply_parses_and_reencodes(label: str, rec: dict[str, Any]) -> None:
    fields = _decode(rec).ext_fields
    header = _REPLY_PARSERS[rec["reply_to_code"]](fields)
    assert header.to_ext_fields() == fields


def _first(code: int, client: str) -> dict[str, str]:
    for _, rec in _REQUESTS:
        if rec["code"] == code and rec["client"].startswith(client):
            return dict(_decode(rec).ext_fields)
    raise AssertionError(f"no {code} from {client}")


def test_cpp_send_mixed_types_and_string_booleans() -> None:
    h = SendMessageRequestHeader.from_ext_fields(_first(10, "cpp"))
    assert (h.producer_group, h.topic, h.default_topic) == ("PID_capture", "TopicTest", "TBW102")
    assert (h.default_topic_queue_nums, h.queue_id, h.sys_flag, h.flag) == (4, 0, 0, 0)
    assert h.born_timestamp == 1795316266403 and h.reconsume_times == 0
    assert h.batch is False and h.unit_mode is False
    assert h.properties is not None and "TAGS\x01TagA\x02" in h.properties


def test_alions_send_v2_letters_and_native_types() -> None:
    h = SendMessageRequestHeader.from_ext_fields_v2(_first(310, "ali"))
    assert (h.producer_group, h.topic, h.default_topic) == ("PID_alions", "TopicTest", "TBW102")
    assert (h.default_topic_queue_nums, h.queue_id, h.sys_flag, h.flag) == (4, 1, 0, 0)
    assert h.unit_mode is False and h.batch is False and h.reconsume_times == 0
    assert SendMessageRequestHeader.from_ext_fields_v2(h.to_ext_fields_v2()) == h


@pytest.mark.parametrize(("text", "expected"), [("1", True), ("0", False), ("true", True)])
def test_batch_comes_from_the_field(text: str, expected: bool) -> None:
    fields = _first(10, "cpp") | {"batch": text}
    assert SendMessageRequestHeader.from_ext_fields(fields).batch is expected
    v2 = SendMessageRequestHeader.from_ext_fields(fields).to_ext_fields_v2()
    assert SendMessageRequestHeader.from_ext_fields_v2(v2).batch is expected


def test_send_missing_field_names_it() -> None:
    fields = _first(10, "cpp")
    del fields["topic"]
    with pytest.raises(HeaderFieldError, match="<topic>"):
        SendMessageRequestHeader.from_ext_fields(fields)
    with pytest.raises(HeaderFieldError, match="<b>"):
        SendMessageRequestHeader.from_ext_fields_v2({"a": "g"})


def test_pull_flags_and_mixed_types() -> None:
    cpp = PullMessageRequestHeader.from_ext_fields(_first(11, "cpp"))
    assert cpp.sys_flag == 6 and cpp.has_suspend and cpp.has_subscription
    assert not cpp.has_commit_offset and not cpp.has_class_filter
    assert cpp.suspend_timeout_millis == 15000 and cpp.max_msg_nums == 32
    ali = PullMessageRequestHeader.from_ext_fields(_first(11, "ali"))
    assert ali.subscription == "TagA || TagB" and ali.sub_version == 1795316326675


def test_send_back_both_shapes() -> None:
    cpp = ConsumerSendMsgBackRequestHeader.from_ext_fields(_first(36, "cpp"))
    assert (cpp.group, cpp.offset, cpp.delay_level, cpp.origin_topic) == ("CID_capture", 0, 0, None)
    ali = ConsumerSendMsgBackRequestHeader.from_ext_fields(_first(36, "ali"))
    assert ali.unit_mode is False and ali.max_reconsume_times == 16
    assert ali.origin_msg_id == "7F000001000051AF0000000000000000"


def test_unregister_empty_group_is_absent() -> None:
    cpp = UnregisterClientRequestHeader.from_ext_fields(_first(35, "cpp"))
    assert cpp.producer_group == "PID_capture" and cpp.consumer_group is None


def test_send_reply_fields_are_strings_in_java_order() -> None:
    fields = SendMessageResponseHeader("ID", 1, 2, None, "DefaultRegion", True).to_ext_fields()
    assert list(fields) == ["msgId", "queueId", "queueOffset", "MSG_REGION", "TRACE_ON"]
    assert fields["TRACE_ON"] == "true"


def test_pull_reply_has_all_four_fields() -> None:
    fields = PullMessageResponseHeader(0, 0, 0, 0).to_ext_fields()
    assert fields == {
        "suggestWhichBrokerId": "0",
        "minOffset": "0",
        "maxOffset": "0",
        "nextBeginOffset": "0",
    }


ROUND_TRIPS: list[Any] = [
    TopicQueueRequestHeader("T", 3),
    OffsetResponseHeader(-1),
    GetEarliestMsgStoretimeResponseHeader(123),
    SearchOffsetRequestHeader("T", 1, 99),
    ViewMessageRequestHeader(1234),
    QueryMessageRequestHeader("T", "k", 32, 0, 10),
    QueryMessageResponseHeader(1, 2),
    EndTransactionRequestHeader("P", 1, 2, 8, "ID", True, "tx"),
    EndTransactionRequestHeader("P", 1, 2, 0, "ID"),
    CreateTopicRequestHeader("T", "TBW102", 8, 8, 6, "SINGLE_TAG", 0, True),
    CreateTopicRequestHeader("T", "TBW102", 8, 8, 6, "SINGLE_TAG"),
    DeleteTopicRequestHeader("T"),
    UpdateConsumerOffsetRequestHeader("G", "T", 1, -1),
    QueryConsumerOffsetRequestHeader("G", "T", 1),
    UnregisterClientRequestHeader("c", None, "G"),
    NotifyConsumerIdsChangedRequestHeader("G"),
    GetConsumerListByGroupRequestHeader("G"),
]


@pytest.mark.parametrize("header", ROUND_TRIPS, ids=lambda h: type(h).__name__)
def test_round_trip(header: Any) -> None:
    assert type(header).from_ext_fields(header.to_ext_fields()) == header


def test_create_topic_order_accepts_cpp_style_boolean() -> None:
    fields = CreateTopicRequestHeader("T", "D", 1, 1, 6, "SINGLE_TAG").to_ext_fields()
    assert CreateTopicRequestHeader.from_ext_fields(fields | {"order": "1"}).order is True


# The v2 send header has a direct path for the usual texts; the general one (Java's
# rules and error texts) must give the same header, or the same error, for anything.
# Examples are usual headers with one field made odd (or dropped), so that every odd
# value meets the direct path's test with the other fields passing it.
_V2_ODD_INT = st.one_of(
    st.sampled_from(["007", "2147483647", "2147483648", "-1", "+1", " 1", "1_0", "", "1.0"]),
    st.sampled_from(["9223372036854775807", "9223372036854775808", "9999999999999999999"]),
    st.integers(-(2**63), 2**64).map(str),
    st.text(alphabet="0123456789\u0663\u00b2 -+", max_size=20),
)
_V2_ODD_BOOL = st.sampled_from(["TRUE", "False", "1", "0", " true", "yes", ""])
_V2_USUAL = st.fixed_dictionaries(
    {k: st.text(max_size=8) for k in "abc"}
    | {k: st.integers(0, 999_999_999).map(str) for k in "defh"}
    | {"g": st.integers(0, 2**62).map(str)},
    optional={"i": st.text(max_size=8), "n": st.text(max_size=8),
              "j": st.integers(0, 16).map(str), "l": st.integers(0, 16).map(str),
              "k": st.sampled_from(["true", "false"]), "m": st.sampled_from(["true", "false"])},
)  # fmt: skip


@st.composite
def _v2_fields(draw: st.DrawFn) -> dict[str, str]:
    fields = draw(_V2_USUAL)
    key = draw(st.sampled_from("abcdefghjklm"))
    if key in "abc" or (draw(st.booleans()) and key in "defgh"):
        fields.pop(key, None)
    else:
        fields[key] = draw(_V2_ODD_BOOL if key in "km" else _V2_ODD_INT)
    return fields


_LONG_NAME_OF: dict[str, str] = {short: long for long, short in _SEND_V2_NAMES.items()}


def _assert_v2_paths_agree(fields: dict[str, str]) -> None:
    """The direct path equals the general one, for the one-letter form and for the same
    header under long names (SEND_MESSAGE, as the stock C++ client sends it)."""
    long_fields = {_LONG_NAME_OF.get(key, key): value for key, value in fields.items()}
    cases = [
        (fields, _SEND_V2_NAMES, SendMessageRequestHeader.from_ext_fields_v2),
        (long_fields, _SEND_LONG_NAMES, SendMessageRequestHeader.from_ext_fields),
    ]
    for form, names, direct in cases:
        try:
            expected: object = SendMessageRequestHeader._parse(form, names)
        except HeaderFieldError as exc:
            expected = str(exc)
        try:
            got: object = direct(form)
        except HeaderFieldError as exc:
            got = str(exc)
        assert got == expected


@given(usual=_V2_USUAL, odd=_v2_fields())
@settings(max_examples=600, deadline=None)
def test_send_v2_direct_path_equals_the_general_one(
    usual: dict[str, str], odd: dict[str, str]
) -> None:
    _assert_v2_paths_agree(usual)
    _assert_v2_paths_agree(odd)


def test_send_v2_direct_path_at_every_boundary() -> None:
    usual = {"a": "g", "b": "T", "c": "D", "d": "4", "e": "1", "f": "0", "g": "1", "h": "0"}
    odd = ["007", "999999999", "1000000000", "2147483647", "2147483648", "-1", "+1", " 1",
           "1_0", "", "\u0663", "\u00b2", "922337203685477580", "9223372036854775807",
           "9223372036854775808", "9999999999999999999", "18446744073709551616"]  # fmt: skip
    for key in "defghjl":
        for text in odd:
            _assert_v2_paths_agree(usual | {key: text})
    for key in "km":
        for text in ["true", "false", "TRUE", "1", "0", " true", "yes", ""]:
            _assert_v2_paths_agree(usual | {key: text})


def test_send_v2_direct_path_reads_a_usual_header() -> None:
    fields = {
        "a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "3", "f": "0", "g": "1795811054493",
        "h": "0", "i": "TAGS\x01A", "j": "0", "k": "false", "m": "true", "n": "broker-a",
    }  # fmt: skip
    header = SendMessageRequestHeader.from_ext_fields_v2(fields)
    assert header == SendMessageRequestHeader(
        "g", "T", "TBW102", 4, 3, 0, 1795811054493, 0, "TAGS\x01A", 0, False, True, None,
        "broker-a",
    )  # fmt: skip
    assert header.to_ext_fields_v2() == fields


def _assert_reply_paths_agree(fields: dict[str, str]) -> None:
    try:
        expected: object = SendMessageResponseHeader._parse(fields)
    except HeaderFieldError as exc:
        expected = str(exc)
    try:
        got: object = SendMessageResponseHeader.from_ext_fields(fields)
    except HeaderFieldError as exc:
        got = str(exc)
    assert got == expected


@given(
    fields=st.fixed_dictionaries(
        {"msgId": st.text(max_size=8), "queueId": st.integers(0, 999_999_999).map(str),
         "queueOffset": st.integers(0, 2**62).map(str)},
        optional={"TRACE_ON": st.sampled_from(["true", "false"]), "MSG_REGION": st.text(max_size=4),
                  "transactionId": st.text(max_size=4)},
    ),
    key=st.sampled_from(["msgId", "queueId", "queueOffset", "TRACE_ON"]),
    odd=st.none() | _V2_ODD_INT | _V2_ODD_BOOL,
)  # fmt: skip
@settings(max_examples=400, deadline=None)
def test_send_reply_direct_path_equals_the_general_one(
    fields: dict[str, str], key: str, odd: str | None
) -> None:
    _assert_reply_paths_agree(fields)
    if odd is None:
        fields.pop(key, None)
    else:
        fields[key] = odd
    _assert_reply_paths_agree(fields)


def test_send_reply_direct_path_at_every_boundary() -> None:
    usual = {"msgId": "M", "queueId": "1", "queueOffset": "2", "TRACE_ON": "true"}
    odd = ["007", "999999999", "1000000000", "2147483647", "2147483648", "-1", "+1", " 1",
           "", "\u0663", "922337203685477580", "9223372036854775807", "9223372036854775808",
           "9999999999999999999"]  # fmt: skip
    for key in ("queueId", "queueOffset"):
        for text in odd:
            _assert_reply_paths_agree(usual | {key: text})
    for text in ["true", "false", "TRUE", "1", "0", " true", "yes", ""]:
        _assert_reply_paths_agree(usual | {"TRACE_ON": text})
    for key in usual:
        _assert_reply_paths_agree({k: v for k, v in usual.items() if k != key})


@given(
    msg_id=st.text(max_size=40),
    queue_id=st.integers(0, 2**31 - 1),
    queue_offset=st.integers(0, 2**63 - 1),
    region=st.text(max_size=16),
)
def test_send_reply_stored_fields_equal_the_headers(
    msg_id: str, queue_id: int, queue_offset: int, region: str
) -> None:
    header = SendMessageResponseHeader(msg_id, queue_id, queue_offset, None, region, True)
    direct = SendMessageResponseHeader.stored_fields(msg_id, queue_id, queue_offset, region)
    assert list(direct.items()) == list(header.to_ext_fields().items())  # order too
