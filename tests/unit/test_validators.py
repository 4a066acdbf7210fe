"""Topic and group name rules with RocketMQ's remark texts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common.constants import NOT_ALLOWED_SEND_TOPICS, SYSTEM_TOPICS
from aiorocketmq.common.validators import (
    is_not_allowed_send_topic,
    is_system_topic,
    is_topic_or_group_illegal,
    not_allowed_send_remark,
    system_topic_remark,
    validate_group,
    validate_topic,
    validate_topic_client,
)

BLANK = "The specified topic is blank."
ILLEGAL = "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
TOO_LONG = "The specified topic is longer than topic max length."


@pytest.mark.parametrize(
    "topic",
    ["TopicTest", "a", "%RETRY%CID_x", "%DLQ%g", "a|b", "A-Z_0-9", "t" * 127, "TBW102"],
)
def test_valid_topics(topic: str) -> None:
    assert validate_topic(topic) is None
    assert validate_topic_client(topic) is None


@pytest.mark.parametrize(
    ("topic", "broker_remark"),
    [
        ("", BLANK),
        ("   ", BLANK),
        ("\t\n", BLANK),
        ("a b", ILLEGAL),
        ("topic!", ILLEGAL),
        ("中文", ILLEGAL),
        ("topic\n", ILLEGAL),  # ``$`` in a regex would let the newline through
        ("t" * 128, TOO_LONG),
        ("a b" * 100, ILLEGAL),  # the broker checks characters before length
        ("\u00a0", ILLEGAL),  # Java: a no-break space is not whitespace
        ("\u2028", BLANK),  # Java: a line separator is whitespace
        ("\x85", ILLEGAL),  # Java: NEL is not whitespace (Python's isspace says yes)
    ],
)
def test_broker_topic_remarks(topic: str, broker_remark: str) -> None:
    assert validate_topic(topic) == broker_remark


def test_client_topic_messages_and_order() -> None:
    assert validate_topic_client("") == "The specified topic is blank"
    assert (
        validate_topic_client("t" * 128)
        == "The specified topic is longer than topic max length 127."
    )
    # The client checks length before characters.
    assert validate_topic_client("a b" * 100) == (
        "The specified topic is longer than topic max length 127."
    )
    assert validate_topic_client("a b") == (
        "The specified topic[a b] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    )


def test_group_rules() -> None:
    assert validate_group("CID_capture") is None
    assert validate_group("g" * 255) is None
    assert validate_group("") == "the specified group is blank"
    assert validate_group(" ") == "the specified group is blank"
    assert validate_group("g" * 256) == "the specified group is longer than group max length 255."
    assert validate_group("bad group") == (
        "the specified group[bad group] contains illegal characters, "
        "allowing only ^[%|a-zA-Z0-9_-]+$"
    )


@given(st.text(max_size=140))
def test_topic_verdict_matches_the_regex(topic: str) -> None:
    valid = re.fullmatch(r"[%|a-zA-Z0-9_-]{1,127}", topic) is not None
    assert (validate_topic(topic) is None) == valid
    assert (validate_topic_client(topic) is None) == valid
    assert is_topic_or_group_illegal(topic) == (
        bool(topic) and re.fullmatch(r"[%|a-zA-Z0-9_-]+", topic) is None
    )


def test_system_topics() -> None:
    assert {
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRACE_TOPIC",
        "BenchmarkTest",
    } <= SYSTEM_TOPICS
    assert is_system_topic("SCHEDULE_TOPIC_XXXX")
    assert is_system_topic("rmq_sys_anything")
    assert not is_system_topic("TopicTest")
    assert system_topic_remark("TBW102") == "The topic[TBW102] is conflict with system topic."
    assert system_topic_remark("TopicTest") is None


def test_not_allowed_send_topics() -> None:
    assert {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    } == NOT_ALLOWED_SEND_TOPICS
    assert is_not_allowed_send_topic("RMQ_SYS_TRANS_HALF_TOPIC")
    assert not is_not_allowed_send_topic("TBW102")  # system, but sendable
    assert not_allowed_send_remark("SELF_TEST_TOPIC") == (
        "Sending message to topic[SELF_TEST_TOPIC] is forbidden."
    )
    assert not_allowed_send_remark("TopicTest") is None
