"""Producer/consumer registries: heartbeats, changes, unregister, close, idle scan."""

from __future__ import annotations

import pytest

from aiorocketmq.broker.client_registry import (
    Channel,
    ClientChannelInfo,
    ConsumerGroupEvent,
    ConsumerManager,
    ProducerManager,
    notify_consumer_ids_changed_request,
    register_heartbeat,
)
from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.protocol_bodies import (
    ConsumerConnection,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerConnection,
    ProducerData,
    build_subscription_data,
)
from aiorocketmq.remoting.codes import LanguageCode
from aiorocketmq.remoting.frame import decode_frame_payload, encode_frame

pytestmark = pytest.mark.timeout(30)


class FakeChannel:
    def __init__(self, name: str) -> None:
        self.remote_address = name
        self.closed = False

    def close(self) -> None:
        self.closed = True


Event = tuple[ConsumerGroupEvent, str, list[Channel]]


def _consumer(group: str = "G", *topics: str, version: int = 1) -> ConsumerData:
    subs = [build_subscription_data(t, "*", version) for t in topics or ("T",)]
    return ConsumerData(group, subscriptions=subs)


def _info(channel: FakeChannel, client_id: str = "c1") -> ClientChannelInfo:
    return ClientChannelInfo(channel, client_id, LanguageCode.CPP, 63)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture
def consumers(clock: ManualClock, events: list[Event]) -> ConsumerManager:
    return ConsumerManager(clock, lambda e, g, chans: events.append((e, g, chans)))


def test_new_channel_changes_group_and_notifies_all(
    consumers: ConsumerManager, events: list[Event]
) -> None:
    a, b = FakeChannel("a"), FakeChannel("b")
    assert consumers.register(_info(a, "c1"), _consumer())
    assert consumers.register(_info(b, "c2"), _consumer())
    assert not consumers.register(_info(a, "c1"), _consumer())
    assert [(e, g, set(ch)) for e, g, ch in events] == [
        (ConsumerGroupEvent.CHANGE, "G", {a}),
        (ConsumerGroupEvent.CHANGE, "G", {a, b}),
    ]
    assert consumers.consumer_ids("G") == ["c1", "c2"]
    assert consumers.consumer_ids("nope") == []
    assert consumers.find_channel("G", "c2") is not None


def test_topic_added_or_dropped_is_a_change_newer_version_is_not(
    consumers: ConsumerManager,
) -> None:
    a = FakeChannel("a")
    consumers.register(_info(a), _consumer("G", "T"))
    assert consumers.register(_info(a), _consumer("G", "T", "U"))
    assert consumers.groups_of_topic("U") == {"G"}
    newer = ConsumerData("G", subscriptions=[build_subscription_data("T", "TagA", 5)])
    assert consumers.register(_info(a), newer)  # U dropped
    sub = consumers.find_subscription("G", "T")
    assert sub is not None and sub.tags_set == ("TagA",)
    older = ConsumerData("G", subscriptions=[build_subscription_data("T", "*", 2)])
    assert not consumers.register(_info(a), older)
    sub = consumers.find_subscription("G", "T")
    assert sub is not None and sub.tags_set == ("TagA",)
    assert consumers.find_subscription("G", "U") is None


def test_notify_can_be_suppressed(consumers: ConsumerManager, events: list[Event]) -> None:
    assert consumers.register(_info(FakeChannel("a")), _consumer(), notify=False)
    assert events == []


def test_unregister_notifies_rest_then_removes_group(
    consumers: ConsumerManager, events: list[Event]
) -> None:
    a, b = FakeChannel("a"), FakeChannel("b")
    consumers.register(_info(a, "c1"), _consumer())
    consumers.register(_info(b, "c2"), _consumer())
    events.clear()
    assert consumers.unregister("G", a)
    assert not consumers.unregister("G", a)
    assert events == [(ConsumerGroupEvent.CHANGE, "G", [b])]
    assert consumers.unregister("G", b)
    assert events[-1] == (ConsumerGroupEvent.UNREGISTER, "G", [])
    assert consumers.get_group("G") is None and consumers.groups() == []


def test_channel_close_removes_everywhere(consumers: ConsumerManager, clock: ManualClock) -> None:
    producers = ProducerManager(clock)
    a, b = FakeChannel("a"), FakeChannel("b")
    hb = HeartbeatData("c1", [ProducerData("P")], [_consumer("G1"), _consumer("G2")])
    changed = register_heartbeat(producers, consumers, a, hb, language=LanguageCode.CPP, version=1)
    assert changed == ["G1", "G2"]
    consumers.register(_info(b, "c2"), _consumer("G1"))
    assert producers.find_channel("c1") is a and producers.available_channel("P") is a
    assert sorted(consumers.on_channel_closed(a)) == ["G1", "G2"]
    assert producers.on_channel_closed(a) == ["P"]
    assert consumers.groups() == ["G1"] and consumers.consumer_ids("G1") == ["c2"]
    assert producers.groups() == [] and producers.find_channel("c1") is None
    assert producers.available_channel("P") is None


def test_consumer_settings_follow_heartbeat(consumers: ConsumerManager) -> None:
    data = ConsumerData(
        "G", ConsumeType.CONSUME_ACTIVELY, MessageModel.BROADCASTING, subscriptions=[]
    )
    consumers.register(_info(FakeChannel("a")), data)
    group = consumers.get_group("G")
    assert group is not None and group.consume_type is ConsumeType.CONSUME_ACTIVELY
    assert group.message_model is MessageModel.BROADCASTING
    assert [i.client_id for i in consumers.connections("G")] == ["c1"]


def test_idle_scan_closes_after_120s(consumers: ConsumerManager, clock: ManualClock) -> None:
    producers = ProducerManager(clock)
    a, b = FakeChannel("a"), FakeChannel("b")
    consumers.register(_info(a, "c1"), _consumer())
    producers.register("P", _info(a, "c1"))
    clock.advance(60_000)
    consumers.register(_info(b, "c2"), _consumer())
    producers.register("P", _info(b, "c2"))
    clock.advance(60_000)
    assert consumers.scan_not_active() == [] and producers.scan_not_active() == []
    clock.advance(1)
    assert [i.client_id for i in consumers.scan_not_active()] == ["c1"]
    assert [i.client_id for i in producers.scan_not_active()] == ["c1"]
    assert a.closed and not b.closed
    assert consumers.consumer_ids("G") == ["c2"]
    assert [i.client_id for i in producers.connections("P")] == ["c2"]
    clock.advance(120_001)
    consumers.scan_not_active()
    producers.scan_not_active()
    assert consumers.groups() == [] and producers.groups() == []


def test_producer_register_and_unregister(clock: ManualClock) -> None:
    producers = ProducerManager(clock)
    a = FakeChannel("a")
    assert producers.register("P", _info(a))
    assert not producers.register("P", _info(a))
    assert not producers.unregister("Q", a)
    assert producers.unregister("P", a)
    assert not producers.unregister("P", a)
    assert producers.groups() == []


def test_listener_error_does_not_break_registration(clock: ManualClock) -> None:
    def boom(event: ConsumerGroupEvent, group: str, channels: list[Channel]) -> None:
        raise RuntimeError("listener")

    consumers = ConsumerManager(clock, boom)
    assert consumers.register(_info(FakeChannel("a")), _consumer())
    assert consumers.consumer_ids("G") == ["c1"]


def test_notify_request_encoding() -> None:
    cmd = notify_consumer_ids_changed_request("CID_capture")
    assert cmd.is_oneway and not cmd.is_response
    decoded = decode_frame_payload(encode_frame(cmd)[4:])
    assert decoded.code == 40 and decoded.flag == 2
    assert decoded.ext_fields == {"consumerGroup": "CID_capture"}
    assert decoded.language is LanguageCode.JAVA


def test_admin_connection_bodies(consumers: ConsumerManager, clock: ManualClock) -> None:
    producers = ProducerManager(clock)
    a = FakeChannel("127.0.0.1:5000")
    consumers.register(_info(a, "c1"), _consumer("G", "T"))
    producers.register("P", _info(a, "c1"))
    body = consumers.consumer_connection("G")
    assert body is not None and consumers.consumer_connection("nope") is None
    again = ConsumerConnection.decode(body.encode())
    assert again == body
    assert [(c.client_id, c.client_addr, c.language, c.version) for c in again.connections] == [
        ("c1", "127.0.0.1:5000", "CPP", 63)
    ]
    assert list(again.subscriptions) == ["T"]
    prod = ProducerConnection.decode(producers.producer_connection("P").encode())
    assert [c.client_id for c in prod.connections] == ["c1"]
    assert producers.producer_connection("nope").connections == []
