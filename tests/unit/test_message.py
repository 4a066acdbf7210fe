"""Message, MessageExt and MessageQueue value objects."""

from __future__ import annotations

import dataclasses

import pytest

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.message import Message, MessageExt, MessageQueue


def test_property_accessors() -> None:
    msg = Message("TopicTest", b"body")
    assert msg.tags is None and msg.keys == [] and msg.delay_time_level == 0
    assert msg.wait_store_msg_ok  # true when absent, as Java
    msg.tags = "TagA"
    msg.keys = ["k1", "k2"]
    msg.delay_time_level = 3
    msg.wait_store_msg_ok = False
    msg.buyer_id = "b1"
    assert msg.properties == {
        "TAGS": "TagA",
        "KEYS": "k1 k2",
        "DELAY": "3",
        "WAIT": "false",
        "BUYER_ID": "b1",
    }
    assert msg.keys == ["k1", "k2"]
    msg.keys = "single"
    assert msg.keys == ["single"]
    msg.properties["KEYS"] = " a  b "
    assert msg.keys == ["a", "b"]
    msg.tags = None
    msg.buyer_id = None
    assert "TAGS" not in msg.properties and msg.buyer_id is None
    msg.properties["WAIT"] = "TRUE"
    assert msg.wait_store_msg_ok
    msg.properties["UNIQ_KEY"] = "ABC"
    assert msg.uniq_key == "ABC"
    msg.clear_property("UNIQ_KEY")
    assert msg.get_property("UNIQ_KEY") is None


@pytest.mark.parametrize("raw", ["x", " 3", "3_0", "٣", "", "1.0"])
def test_bad_delay_is_a_remote_error(raw: str) -> None:
    msg = Message("T", b"", properties={"DELAY": raw})
    with pytest.raises(RemoteProtocolError):
        _ = msg.delay_time_level


def test_delay_accepts_java_integers() -> None:
    assert Message("T", properties={"DELAY": "+2"}).delay_time_level == 2
    assert Message("T", properties={"DELAY": "-1"}).delay_time_level == -1


def test_put_user_property_rules() -> None:
    msg = Message("T", b"")
    msg.put_user_property("myprop", "myvalue")
    msg.put_user_property("INNER_MULTI_DISPATCH", "%LMQ%1")  # allowed in 4.9.x
    assert msg.properties == {"myprop": "myvalue", "INNER_MULTI_DISPATCH": "%LMQ%1"}
    with pytest.raises(LocalProtocolError, match="used by system"):
        msg.put_user_property("TAGS", "x")
    with pytest.raises(LocalProtocolError, match="blank"):
        msg.put_user_property("k", "  ")
    with pytest.raises(LocalProtocolError, match="blank"):
        msg.put_user_property("", "v")
    msg.put_property("TAGS", "internal")  # the system path has no such check
    assert msg.tags == "internal"


def test_message_ext_defaults_and_slots() -> None:
    ext = MessageExt("T", b"x", queue_id=2, msg_id="ID")
    assert ext.queue_id == 2 and ext.commit_log_offset == 0 and ext.born_host == ("0.0.0.0", 0)
    assert isinstance(ext, Message)
    assert not hasattr(ext, "__dict__")
    with pytest.raises(AttributeError):
        ext.unknown = 1  # type: ignore[attr-defined]
    assert ext == dataclasses.replace(ext)


def test_message_queue_order_hash_and_json() -> None:
    a = MessageQueue("T", "broker-a", 1)
    b = MessageQueue("T", "broker-a", 0)
    c = MessageQueue("T", "broker-b", 0)
    assert sorted([c, a, b]) == [b, a, c]
    assert len({a, MessageQueue("T", "broker-a", 1)}) == 1
    assert a.to_json_dict() == {"topic": "T", "brokerName": "broker-a", "queueId": 1}
    assert MessageQueue.from_json_dict(a.to_json_dict()) == a
    assert (
        MessageQueue.from_json_dict({"topic": "T", "brokerName": "b", "queueId": "3"}).queue_id == 3
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.queue_id = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    "data",
    [
        {"topic": "T", "brokerName": "b"},
        {"topic": 1, "brokerName": "b", "queueId": 0},
        {"topic": "T", "brokerName": "b", "queueId": True},
        {"topic": "T", "brokerName": "b", "queueId": "x"},
        {"topic": "T", "brokerName": "b", "queueId": 1.5},
        {"topic": "T", "brokerName": "b", "queueId": None},
    ],
)
def test_message_queue_rejects_bad_json(data: dict[str, object]) -> None:
    with pytest.raises(RemoteProtocolError):
        MessageQueue.from_json_dict(data)


def test_tags_and_keys_as_keywords_with_positional_compatibility() -> None:
    msg = Message("T", b"body", tags="TagA", keys=["k1", "k2"])
    assert msg.tags == "TagA" and msg.keys == ["k1", "k2"]
    assert msg.properties == {"TAGS": "TagA", "KEYS": "k1 k2"}
    assert Message("T", b"b", keys="a b").keys == ["a", "b"]
    old = Message("T", b"b", 7, {"X": "1"}, "tx-1")
    assert (old.flag, old.properties, old.transaction_id) == (7, {"X": "1"}, "tx-1")
    assert Message("T", b"b") == Message("T", b"b")  # the dataclass equality is kept


def test_tags_and_keys_never_change_a_shared_properties_dict() -> None:
    shared = {"X": "1"}
    a = Message("T", b"", properties=shared, tags="A")
    b = Message("T", b"", properties=shared, keys="k")
    assert shared == {"X": "1"}
    assert a.properties == {"X": "1", "TAGS": "A"} and b.properties == {"X": "1", "KEYS": "k"}
    plain = Message("T", b"", properties=shared)
    assert plain.properties is shared  # without tags/keys: used as given, as before


def test_bad_body_or_tags_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="encode a str first"):
        Message("T", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tags must be a str"):
        Message("T", b"", tags=["A"])  # type: ignore[arg-type]
    assert Message("T", memoryview(b"ab")).body == b"ab"
    ext = MessageExt("T", b"x", queue_id=3)  # the stored form keeps its generated init
    assert ext.queue_id == 3 and ext.properties == {}
