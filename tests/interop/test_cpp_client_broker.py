"""The stock C++ client (PyPI ``rocketmq`` 0.4.4) against real ``mqnamesrv`` + ``mqbroker``.

Each test starts a name server and a broker as processes (free ports, store in
``tmp_path``, stopped by SIGTERM with a clean exit checked) and runs the client's
roles from ``tests/interop/cpp_client.py``, each in its own process: producers
(sync, oneway, orderly by a sharding key, batch), PushConsumers with a tag
expression or sharing a group, and a PullConsumer reading every queue from
offset 0. Every check counts messages by key: none missing, none foreign, none
twice.

10,000 messages are sent sync, oneway and orderly (4,000 + 3,000 + 3,000) and
over 15,000 received and checked (push and pull); the group test adds 3,200
batch-sent messages split between two consumers.

The topics are auto-created on the first send through ``TBW102`` (4 queues, the
client's ``defaultTopicQueueNums``), the consumer groups are new: the push
consumer sees anything only because QUERY_CONSUMER_OFFSET answers 0 for a new
group on a queue that never lost messages (PITFALLS.md).
"""

from __future__ import annotations

import importlib.util
import json
from collections import defaultdict
from pathlib import Path

import pytest

from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.interop.stock_support import (
    CONSUMED,
    PRODUCED,
    PULLED,
    Received,
    Sent,
    StartProcess,
    assert_exactly_once,
    cpp_log_bytes,
    expected_messages,
    finish,
    read_pulled,
    read_received,
    read_send_results,
    start_cpp,
)
from tests.support.cluster import start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = [
    pytest.mark.interop,
    pytest.mark.timeout(90),
    pytest.mark.skipif(
        importlib.util.find_spec("rocketmq") is None, reason="PyPI rocketmq (x86_64 Linux only)"
    ),
]

CLIENT_TIMEOUT_S = 50.0
QUEUES = 4  # the C++ producer's defaultTopicQueueNums, below TBW102's 8
SHARDS = 16
LOG_LIMIT_BYTES = 32 * 1024 * 1024


async def cluster(start_process: StartProcess, tmp_path: Path) -> str:
    """A name server and one broker registered with it; the name server's address."""
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv)
    return namesrv


def assert_send_results_match(results: dict[str, tuple[int, str]], pulled: list[Received]) -> None:
    """The SendResult of each key (queueOffset, msgId: the broker's reply as the C++
    client read it) names the message the pull consumer found there."""
    assert results
    found = {r.key: (r.queue_offset, r.msg_id) for r in pulled}
    wrong = [(k, v, found.get(k)) for k, v in results.items() if found.get(k) != v]
    assert not wrong, f"{len(wrong)} send results differ from the pulled messages: {wrong[:3]}"


def assert_queues_dense(records: list[Received]) -> None:
    """Per queue, the pulled offsets are 0..n-1 in order, over all ``QUEUES`` queues."""
    by_queue: dict[int, list[int]] = defaultdict(list)
    for r in records:
        by_queue[r.queue_id].append(r.queue_offset)
    assert sorted(by_queue) == list(range(QUEUES))
    for queue_id, offsets in by_queue.items():
        assert offsets == list(range(len(offsets))), f"queue {queue_id} not read from 0 in order"


async def produce(
    start_process: StartProcess, home: Path, namesrv: str, topic: str, mode: str, sent: list[Sent]
) -> dict[str, str]:
    """Send ``sent`` (from ``expected_messages``) with one producer; no errors.
    Sync and orderly sends record their SendResults in ``<home>/<mode>.results``."""
    n, prefix = len(sent), sent[0].key[:-6]
    args = ["produce", namesrv, topic, mode, str(n), "--prefix", prefix, "--shards", str(SHARDS)]
    args += ["--results", str(home / f"{mode}.results")]
    proc = start_cpp(start_process, home, f"cpp-produce-{mode}", args, PRODUCED)
    result = await finish(proc, CLIENT_TIMEOUT_S)
    assert (result["count"], result["errors"]) == (str(n), "0"), proc.tail()
    return result


async def pull_all(
    start_process: StartProcess, home: Path, namesrv: str, topic: str, out: Path
) -> list[Received]:
    """A stock PullConsumer (new group) reads every queue of ``topic`` from offset 0."""
    proc = start_cpp(
        start_process, home, "cpp-pull", ["pull", namesrv, topic, "GID_pull", "*", str(out)], PULLED
    )
    await finish(proc, CLIENT_TIMEOUT_S)
    return read_pulled(out)


async def test_sync_and_oneway_to_tag_filtered_push_and_full_pull(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv = await cluster(start_process, tmp_path)
    home, topic = tmp_path / "cpp-home", "TopicMix"
    sync, oneway = expected_messages(4000, "s", SHARDS), expected_messages(3000, "o", SHARDS)
    sent = sync + oneway
    wanted = [m for m in sent if m.tag in ("TagA", "TagC")]
    # The sync producer creates the topic (a C++ consumer started before that would
    # find no route until its 30 s refresh); the consumer drains that backlog, then
    # the oneway producer sends, so the rest arrives through held pulls woken by the
    # new messages.
    await produce(start_process, home, namesrv, topic, "sync", sync)
    push_out = tmp_path / "push.txt"
    push = start_cpp(
        start_process,
        home,
        "cpp-push",
        ["push", namesrv, topic, "GID_push", "TagA || TagC", str(len(wanted)), "45", str(push_out)],
        CONSUMED,
    )
    backlog = sum(m.tag in ("TagA", "TagC") for m in sync)
    await wait_until(
        lambda: push_out.exists() and push_out.read_bytes().count(b"\n") >= backlog,
        timeout=CLIENT_TIMEOUT_S,
        interval=0.05,
        what="the push consumer to drain the sync backlog",
    )
    await produce(start_process, home, namesrv, topic, "oneway", oneway)
    consumed = await finish(push, CLIENT_TIMEOUT_S)
    received = read_received(push_out)
    assert_exactly_once(received, wanted)
    assert consumed["distinct"] == str(len(wanted))
    pulled = await pull_all(start_process, home, namesrv, topic, tmp_path / "pull.txt")
    assert_exactly_once(pulled, sent)
    assert_queues_dense(pulled)
    sync_results = read_send_results(home / "sync.results")
    assert sorted(sync_results) == [m.key for m in sync]
    assert_send_results_match(sync_results, pulled)
    assert cpp_log_bytes(home) < LOG_LIMIT_BYTES


def assert_shard_order(records: list[Received], sent: list[Sent]) -> None:
    """Each sharding key's messages are in its queue (``shard % QUEUES``: the
    client's hashing_queue_selector) and appear in ``records`` in sending order."""
    by_key = {m.key: m for m in sent}
    seqs: dict[int, list[int]] = defaultdict(list)
    for r in records:
        m = by_key[r.key]
        assert r.queue_id == m.shard % QUEUES, r
        seqs[m.shard].append(m.seq)
    assert sorted(seqs) == list(range(SHARDS))
    for shard, order in seqs.items():
        assert order == list(range(len(order))), f"shard {shard} out of order"


async def lock_queues(broker_addr: str, group: str, topic: str) -> set[int]:
    """LOCK_BATCH_MQ for every queue of ``topic`` as a client id of our own: the
    queue ids the broker let us lock (none while a live consumer holds them)."""
    mq_set = [{"topic": topic, "brokerName": "broker-a", "queueId": q} for q in range(QUEUES)]
    body = {"consumerGroup": group, "clientId": "127.0.0.1@lock-probe", "mqSet": mq_set}
    client = RemotingClient()
    try:
        request = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, json.dumps(body).encode())
        reply = await client.invoke(broker_addr, request, 3000)
    finally:
        await client.close()
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return {mq["queueId"] for mq in json.loads(bytes(reply.body))["lockOKMQSet"]}


async def test_orderly_keeps_per_key_order_in_its_queue(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    home, topic = tmp_path / "cpp-home", "TopicOrder"
    sent = expected_messages(3000, "r", SHARDS)
    await produce(start_process, home, namesrv, topic, "orderly", sent)
    pulled = await pull_all(start_process, home, namesrv, topic, tmp_path / "pull.txt")
    assert_exactly_once(pulled, sent)
    assert_queues_dense(pulled)
    assert_send_results_match(read_send_results(home / "orderly.results"), pulled)
    assert_shard_order(pulled, sent)  # pull order: queue by queue, each from offset 0 up
    by_key = {m.key: m for m in sent}
    assert all(
        r.body == f"{r.key}|{r.tag}|{by_key[r.key].shard}|{by_key[r.key].seq}" for r in pulled
    )
    # The same topic through the orderly push consumer (LOCK_BATCH_MQ per queue,
    # then each queue consumed in order) and, in another group at the same time, a
    # concurrent one with a single-tag expression.
    wanted = [m for m in sent if m.tag == "TagB"]
    outs = {"ordered": tmp_path / "ordered.txt", "tag-b": tmp_path / "tag-b.txt"}
    stop = tmp_path / "stop"
    ordered_args = ["push", namesrv, topic, "GID_ordered", "*", "1000000", "45"]
    ordered_args += ["--orderly", "--stop-file", str(stop)]
    tag_b_args = ["push", namesrv, topic, "GID_tag_b", "TagB", str(len(wanted)), "45"]
    consumers = [
        start_cpp(
            start_process,
            home,
            "cpp-push-ordered",
            [*ordered_args, str(outs["ordered"])],
            CONSUMED,
        ),
        start_cpp(
            start_process, home, "cpp-push-tag-b", [*tag_b_args, str(outs["tag-b"])], CONSUMED
        ),
    ]
    await wait_until(
        lambda: len(read_received(outs["ordered"])) >= len(sent),
        timeout=CLIENT_TIMEOUT_S,
        interval=0.05,
        what="the orderly consumer to get every message",
    )
    # It holds the broker's locks on all four queues while it runs, and gives them
    # back (UNLOCK_BATCH_MQ) when it shuts down. The C++ 1.2 client's unlockAll
    # leaves the first queue of each broker out of its request (it creates the
    # per-broker list without adding that entry: seen on the wire), so queue 0 stays
    # held until the lock expires (60 s), unless a %RETRY% queue sorted first and
    # was the one left out.
    assert await lock_queues(broker.addr, "GID_ordered", topic) == set()
    stop.touch()
    for proc in consumers:
        await finish(proc, CLIENT_TIMEOUT_S)
    assert await lock_queues(broker.addr, "GID_ordered", topic) >= set(range(1, QUEUES))
    ordered = read_received(outs["ordered"])
    assert_exactly_once(ordered, sent)
    assert_shard_order(ordered, sent)
    assert_exactly_once(read_received(outs["tag-b"]), wanted)
    assert cpp_log_bytes(home) < LOG_LIMIT_BYTES


async def consumer_ids(broker_addr: str, group: str) -> list[str]:
    """GET_CONSUMER_LIST_BY_GROUP: the broker's live members of ``group``."""
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}
        )
        reply = await client.invoke(broker_addr, request, 3000)
    finally:
        await client.close()
    if reply.code != ResponseCode.SUCCESS:
        return []
    return list(json.loads(bytes(reply.body))["consumerIdList"])


async def test_batch_sends_split_between_two_consumers_of_a_group(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    home, topic, group = tmp_path / "cpp-home", "TopicShared", "GID_shared"
    stop = tmp_path / "stop"
    outs = [tmp_path / "push-a.txt", tmp_path / "push-b.txt"]

    def start_consumer(i: int) -> ManagedProcess:
        args = ["push", namesrv, topic, group, "*", "1000000", "45", str(outs[i])]
        args += ["--stop-file", str(stop)]
        return start_cpp(start_process, home, f"cpp-push-{'ab'[i]}", args, CONSUMED)

    def union() -> list[Received]:
        return read_received(outs[0]) + read_received(outs[1])

    async def until_received(batch: list[Sent], what: str) -> None:
        keys = {m.key for m in batch}
        await wait_until(
            lambda: keys <= {r.key for r in union()},
            timeout=CLIENT_TIMEOUT_S,
            interval=0.05,
            what=what,
        )

    # A alone drains a first batch (the send creates the topic), then B joins the
    # group: the broker notifies both, they split the four queues. A second batch
    # shows the split is in place (B got some of it); only then the measured batch.
    first, second = expected_messages(200, "p", SHARDS), expected_messages(200, "q", SHARDS)
    await produce(start_process, home, namesrv, topic, "sync", first)
    consumers = [start_consumer(0)]
    await until_received(first, "consumer A to drain the first batch")
    consumers.append(start_consumer(1))

    async def both_members() -> bool:
        return len(await consumer_ids(broker.addr, group)) == 2

    await wait_until(both_members, timeout=CLIENT_TIMEOUT_S, what="two consumers in the group")
    await produce(start_process, home, namesrv, topic, "sync", second)
    await until_received(second, "the second batch")
    await wait_until(
        lambda: any(r.key[0] == "q" for r in read_received(outs[1])),
        timeout=CLIENT_TIMEOUT_S,
        interval=0.05,
        what="consumer B to get part of the second batch",
    )
    main = expected_messages(3200, "m", SHARDS)
    await produce(start_process, home, namesrv, topic, "batch", main)
    await until_received(main, "the batch-sent messages")
    stop.touch()
    for proc in consumers:
        await finish(proc, CLIENT_TIMEOUT_S)
    measured = [r for r in union() if r.key.startswith("m")]
    assert_exactly_once(measured, main)
    assert {r.key[0] for r in union()} <= {"p", "q", "m"}  # nothing foreign at all
    queues = [{r.queue_id for r in read_received(out) if r.key[0] == "m"} for out in outs]
    assert queues[0] and queues[1], queues  # both consumed part of it
    assert not queues[0] & queues[1], queues  # each queue had one owner
    assert queues[0] | queues[1] == set(range(QUEUES))
