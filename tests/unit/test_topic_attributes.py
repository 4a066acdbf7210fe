"""RocketMQ 5's topic attributes: the modification text's rules, and TopicConfig's
``attributes`` in JSON (absent for a 4.9 topic, so its bytes do not change)."""

from __future__ import annotations

import pytest

from aiorocketmq.common.topic_attributes import (
    alter_attributes,
    parse_attributes,
    topic_message_type,
)
from aiorocketmq.common.topic_config import TopicConfig, TopicConfigSerializeWrapper


def test_parse_signs_keys_values() -> None:
    assert parse_attributes(None) == [] and parse_attributes("") == []
    assert parse_attributes("+message.type=FIFO,-a.b") == [
        ("+", "message.type", "FIFO"),
        ("-", "a.b", ""),
    ]
    assert parse_attributes("+k=a=b") == [("+", "k", "a=b")]  # split on the first "="


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("message.type=FIFO", "Invalid attribute format: message.type=FIFO"),
        ("+k", "Add/alter attribute requires a value: k"),
        ("+k=1,+k=2", "Duplicate key: k"),
        ("+=1", "kv string format wrong."),
        ("++k=1", "kv string format wrong."),
        (",", "Invalid attribute format: "),
    ],
)
def test_malformed_texts(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=f"^{error}"):
        parse_attributes(text)


def test_alter_create_update_delete() -> None:
    assert alter_attributes(True, {}, "+message.type=FIFO") == {"message.type": "FIFO"}
    with pytest.raises(ValueError, match="only add attribute is supported while creating"):
        alter_attributes(True, {}, "-message.type")
    current = {"message.type": "FIFO"}
    assert alter_attributes(False, current, None) == current  # kept
    assert alter_attributes(False, current, "+message.type=DELAY") == {"message.type": "DELAY"}
    assert alter_attributes(False, current, "-message.type") == {}
    with pytest.raises(ValueError, match=r"attempt to delete a nonexistent key: message\.type"):
        alter_attributes(False, {}, "-message.type")
    with pytest.raises(ValueError, match=r"unsupported key: queue\.type"):
        alter_attributes(False, {}, "+queue.type=BatchCQ")
    with pytest.raises(ValueError, match="value is not in set"):
        alter_attributes(False, {}, "+message.type=fifo")  # names are upper case


def test_a_topic_without_a_type_is_mixed() -> None:
    assert topic_message_type({}) == "MIXED"
    assert topic_message_type({"message.type": "FIFO"}) == "FIFO"


def test_topic_config_json_carries_attributes_only_when_there_are_some() -> None:
    plain = TopicConfig("T", 4, 4)
    assert "attributes" not in plain.to_json_dict()
    typed = TopicConfig("T", 4, 4, attributes=(("message.type", "FIFO"),))
    assert next(iter(typed.to_json_dict())) == "attributes"  # fastjson's order
    wrapper = TopicConfigSerializeWrapper({"T": typed, "U": plain})
    again = TopicConfigSerializeWrapper.decode(wrapper.encode())
    assert again.topic_config_table == {"T": typed, "U": plain}
    assert again.topic_config_table["T"].attributes_map == {"message.type": "FIFO"}
    assert hash(typed) != hash(plain)  # still hashable
    # A Java 5 broker's table: attributes always present, maybe empty or odd.
    java = TopicConfig.from_json_dict({"topicName": "J", "attributes": {}})
    assert java.attributes == ()
    assert TopicConfig.from_json_dict({"topicName": "J", "attributes": "x"}).attributes == ()
