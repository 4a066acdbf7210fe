"""Allocation strategies: Java's exact outputs on fixed inputs, and properties under Hypothesis.

The golden outputs came from running Java 4.9.8's three algorithms (the allocate
bodies and ConsistentHashRouter with its MD5Hash, transcribed into a scratch Java
program and run with the JDK on this machine) over the inputs built here: queues
0..7 of TopicTest on broker-a then broker-b (first ``n_mq`` of them), client ids
``192.168.0.<i+1>@<1000+i>``.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.client.allocate import (
    AllocateStrategy,
    ConsistentHashRing,
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
    java_mq_string,
    md5_hash,
)
from aiorocketmq.client.errors import InvalidArgumentError
from aiorocketmq.common.message import MessageQueue

MQS = [MessageQueue("TopicTest", b, q) for b in ("broker-a", "broker-b") for q in range(8)]


def _cids(n: int) -> list[str]:
    return [f"192.168.0.{i + 1}@{1000 + i}" for i in range(n)]


# (n_mq, n_cid) -> per consumer (averagely, by circle, consistent hash), as queue indexes.
JAVA = {
    (16, 3): [
        ([0, 1, 2, 3, 4, 5], [0, 3, 6, 9, 12, 15], [2, 9, 12, 15]),
        ([6, 7, 8, 9, 10], [1, 4, 7, 10, 13], [1, 4, 6, 7, 8, 11, 13]),
        ([11, 12, 13, 14, 15], [2, 5, 8, 11, 14], [0, 3, 5, 10, 14]),
    ],
    (16, 5): [
        ([0, 1, 2, 3], [0, 5, 10, 15], [12]),
        ([4, 5, 6], [1, 6, 11], [1, 8]),
        ([7, 8, 9], [2, 7, 12], [0, 3, 10, 14]),
        ([10, 11, 12], [3, 8, 13], [2, 4, 5, 7, 9, 11, 13]),
        ([13, 14, 15], [4, 9, 14], [6, 15]),
    ],
    (3, 5): [([0], [0], []), ([1], [1], [1]), ([2], [2], [0]), ([], [], [2]), ([], [], [])],
    (16, 1): [(list(range(16)),) * 3],
    (7, 2): [([0, 1, 2, 3], [0, 2, 4, 6], [2, 3, 5]), ([4, 5, 6], [1, 3, 5], [0, 1, 4, 6])],
}

STRATEGIES: list[AllocateStrategy] = [
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
]


@pytest.mark.parametrize("case", sorted(JAVA))
def test_exact_outputs_of_java(case: tuple[int, int]) -> None:
    n_mq, n_cid = case
    mqs, cids = MQS[:n_mq], _cids(n_cid)
    for cid, expected in zip(cids, JAVA[case], strict=True):
        for strategy, indexes in zip(STRATEGIES, expected, strict=True):
            assert strategy(cid, mqs, cids) == [mqs[i] for i in indexes], (strategy, cid)


def test_java_hash_and_queue_string() -> None:
    assert md5_hash("abc") == 2416005272
    assert (
        java_mq_string(MQS[0]) == "MessageQueue [topic=TopicTest, brokerName=broker-a, queueId=0]"
    )
    assert md5_hash(java_mq_string(MQS[0])) == 1987926524


def test_empty_inputs_raise_and_an_unknown_client_gets_nothing() -> None:
    for strategy in STRATEGIES:
        with pytest.raises(InvalidArgumentError, match="currentCID is empty"):
            strategy("", MQS, ["a"])
        with pytest.raises(InvalidArgumentError, match="mqAll"):
            strategy("a", [], ["a"])
        with pytest.raises(InvalidArgumentError, match="cidAll"):
            strategy("a", MQS, [])
        assert strategy("stranger", MQS, ["a", "b"]) == []


def test_ring_edge_cases() -> None:
    assert ConsistentHashRing([], 10).route("x") is None
    assert ConsistentHashRing(["a"], 0).route("x") is None
    with pytest.raises(InvalidArgumentError):
        ConsistentHashRing(["a"], -1)
    # A hash that puts every key before the first node routes to it; past the last, wraps.
    ring = ConsistentHashRing(["a", "b"], 1, lambda key: {"a-0": 10, "b-0": 20}.get(key, 0))
    assert ring.route("x") == "a"
    wrap = ConsistentHashRing(["a", "b"], 1, lambda key: {"a-0": 10, "b-0": 20}.get(key, 99))
    assert wrap.route("x") == "a"
    later = ConsistentHashRing(["a", "b"], 1, lambda key: 5)
    assert later.route("x") == "b"  # same hash: the later node replaces the earlier one


queues = st.lists(
    st.builds(
        MessageQueue,
        st.sampled_from(["T1", "T2"]),
        st.sampled_from(["broker-a", "broker-b", "broker-c"]),
        st.integers(0, 63),
    ),
    min_size=1,
    max_size=40,
    unique=True,
).map(sorted)
clients = st.lists(
    st.from_regex(r"10\.0\.0\.[0-9]{1,3}@[0-9]{1,5}", fullmatch=True),
    min_size=1,
    max_size=12,
    unique=True,
).map(sorted)


@given(queues, clients, st.sampled_from(STRATEGIES))
def test_every_queue_has_exactly_one_owner(
    mqs: list[MessageQueue], cids: list[str], strategy: AllocateStrategy
) -> None:
    owners = Counter(mq for cid in cids for mq in strategy(cid, mqs, cids))
    assert owners == Counter(mqs)
    again = [strategy(cid, list(mqs), list(cids)) for cid in cids]
    assert again == [strategy(cid, mqs, cids) for cid in cids]  # deterministic


@given(queues, clients, st.sampled_from(STRATEGIES[:2]))
def test_averaging_strategies_balance_within_one(
    mqs: list[MessageQueue], cids: list[str], strategy: AllocateStrategy
) -> None:
    sizes = [len(strategy(cid, mqs, cids)) for cid in cids]
    assert max(sizes) - min(sizes) <= 1
    assert sum(sizes) == len(mqs)
