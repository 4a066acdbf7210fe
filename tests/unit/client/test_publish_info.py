"""Route -> publish/subscribe info, the producer's round robin, and the stock selectors."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.publish_info import (
    SendWhichQueue,
    TopicPublishInfo,
    route_to_publish_info,
    route_to_subscribe_info,
)
from aiorocketmq.client.selectors import (
    RoundRobinSelector,
    java_hash_code,
    select_by_hash,
    select_by_random,
)
from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.common.route import BrokerData, QueueData, TopicRouteData


def _route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[
            QueueData("broker-b", 2, 3, 6),
            QueueData("broker-a", 4, 2, 6),
            QueueData("broker-c", 1, 1, 6),  # slave only: not writable
            QueueData("broker-d", 2, 2, 4),  # read-only perm
            QueueData("broker-e", 1, 1, 6),  # no BrokerData at all
        ],
        broker_datas=[
            BrokerData("c", "broker-a", {0: "a:1", 1: "a:2"}),
            BrokerData("c", "broker-b", {0: "b:1"}),
            BrokerData("c", "broker-c", {1: "c:2"}),
            BrokerData("c", "broker-d", {0: "d:1"}),
        ],
    )


def test_publish_info_from_route_sorted_writable_with_a_master() -> None:
    info = route_to_publish_info("T", _route())
    assert info.message_queues == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
        MessageQueue("T", "broker-b", 2),
    ]
    assert info.ok() and info.have_topic_router_info and not info.order_topic


def test_publish_info_from_order_topic_conf() -> None:
    route = _route()
    route.order_topic_conf = "broker-x:2;broker-y:1"
    info = route_to_publish_info("T", route)
    assert info.order_topic
    assert info.message_queues == [
        MessageQueue("T", "broker-x", 0),
        MessageQueue("T", "broker-x", 1),
        MessageQueue("T", "broker-y", 0),
    ]


def test_subscribe_info_is_every_readable_queue() -> None:
    mqs = route_to_subscribe_info("T", _route())
    assert Counter(mq.broker_name for mq in mqs) == {
        "broker-a": 4,
        "broker-b": 2,
        "broker-c": 1,
        "broker-d": 2,
        "broker-e": 1,
    }


def test_round_robin_and_skipping_the_failed_broker() -> None:
    info = route_to_publish_info("T", _route())
    info.send_which_queue = SendWhichQueue(start=-1)
    picks = [info.select_one_message_queue() for _ in range(6)]
    assert picks == [*info.message_queues, info.message_queues[0]]
    # Next index is 1 (broker-a): skipped for broker-a's failure, broker-b's queue 0 comes.
    assert info.select_one_message_queue("broker-a") == MessageQueue("T", "broker-b", 0)
    # Only one broker: the skip finds nothing and falls back to plain round robin.
    solo = TopicPublishInfo([MessageQueue("T", "broker-a", 0)], send_which_queue=SendWhichQueue(0))
    assert solo.select_one_message_queue("broker-a") == MessageQueue("T", "broker-a", 0)


def test_send_which_queue_stays_non_negative_across_the_wrap() -> None:
    index = SendWhichQueue(start=2**31 - 2)
    assert [index.increment_and_get() for _ in range(3)] == [2**31 - 1, 0, 1]


MQS = [MessageQueue("T", "b", i) for i in range(8)]


def test_hash_selector_matches_java() -> None:
    # Values printed by the JDK here: "order-1".hashCode() == -1207111310, and
    # Java's abs(-1207111310 % 8) == 6; Long.valueOf(2**40 + 5).hashCode() == 261.
    assert java_hash_code("order-1") == -1207111310
    assert select_by_hash(MQS, Message("T"), "order-1") == MQS[6]
    assert select_by_hash(MQS, Message("T"), -13) == MQS[5]  # abs(-13 % 8) in Java
    assert java_hash_code(2**40 + 5) == 261
    assert select_by_hash(MQS, Message("T"), 12345) == MQS[12345 % 8]


def test_random_and_round_robin_selectors() -> None:
    assert {select_by_random(MQS, Message("T"), None) for _ in range(200)} <= set(MQS)
    rr = RoundRobinSelector()
    assert [rr(MQS[:3], Message("T"), None) for _ in range(4)] == [*MQS[:3], MQS[0]]


@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 4)), min_size=1, max_size=4),
    st.integers(0, 2**31 - 1),
    st.sampled_from("abcd"),
)
def test_selection_skips_the_failed_broker_whenever_another_exists(
    brokers: list[tuple[str, int]], start: int, failed: str
) -> None:
    queues = [
        MessageQueue("T", f"broker-{b}", i) for b, n in dict(brokers).items() for i in range(n)
    ]
    info = TopicPublishInfo(queues, send_which_queue=SendWhichQueue(start))
    picked = info.select_one_message_queue(f"broker-{failed}")
    assert picked in queues
    if any(mq.broker_name != f"broker-{failed}" for mq in queues):
        assert picked.broker_name != f"broker-{failed}"
    # Without a failure, consecutive picks walk the list in order.
    first = info.select_one_message_queue()
    second = info.select_one_message_queue()
    assert queues.index(second) == (queues.index(first) + 1) % len(queues)
