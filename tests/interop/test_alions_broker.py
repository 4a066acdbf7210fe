"""ali-ons 3.12.0 (npm) against real ``mqnamesrv`` + ``mqbroker`` processes.

ali-ons sends with SEND_MESSAGE_V2 (one-letter fields, native JSON types),
heartbeats with enum names, pulls with sysFlag 6/7, and commits offset -1 for a
queue at offset 0 (PITFALLS.md). Its producer cannot auto-create a topic (a
TOPIC_NOT_EXIST route reply ends the send before it would try ``TBW102``), so the
topic is created first, as an operator would: ``mqadmin updateTopic``. Clients
get ``clientIP`` 127.0.0.1 (ali-ons reads the machine's interfaces otherwise).

Checks count messages by key: none missing, none foreign, none twice, across a
tag-filtered group and a ``*`` group running at the same time, then a restart of
the filtered group that must see only what was sent after its offsets were
committed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.interop.stock_support import (
    CONSUMED,
    PRODUCED,
    Received,
    Sent,
    StartProcess,
    assert_exactly_once,
    expected_messages,
    finish,
    node_or_fail,
    read_received,
    start_node,
)
from tests.support.cluster import start_broker, start_namesrv, wait_route
from tests.support.procs import ManagedProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

CLIENT_TIMEOUT_S = 45.0
TOPIC = "TopicAliOns"
QUEUES = 4


async def create_topic(start_process: StartProcess, tmp_path: Path, namesrv: str) -> None:
    """``mqadmin updateTopic -c DefaultCluster -t TOPIC -r 4 -w 4``, as an operator
    would before starting ali-ons applications; waits for the route."""
    args = ["-m", "aiorocketmq.cli.admin", "updateTopic", "-n", namesrv, "-c", "DefaultCluster"]
    args += ["-t", TOPIC, "-r", str(QUEUES), "-w", str(QUEUES)]
    proc = start_process(
        args,
        name="mqadmin-updateTopic",
        ready=r"create topic to (?P<addr>\S+) success",
        wait=False,
        env={"HOME": str(tmp_path)},
    )
    await finish(proc, CLIENT_TIMEOUT_S)
    route = await wait_route(namesrv, TOPIC)
    assert [q.write_queue_nums for q in route.queue_datas] == [QUEUES]


def assert_once_in_topic(records: list[Received], expected: list[Sent]) -> None:
    """Every expected key once, nothing else, tags as sent, queues of ``TOPIC``."""
    assert_exactly_once(records, expected)
    assert {r.queue_id for r in records} <= set(range(QUEUES))


def start_consumer(
    start_process: StartProcess,
    tmp_path: Path,
    namesrv: str,
    name: str,
    group: str,
    expression: str,
    expected: int,
    *extra: str,
) -> tuple[Path, ManagedProcess]:
    """An ali-ons consumer of ``TOPIC`` in ``group``; its output file and process.
    ``extra``: ``alions_consume.js``'s optional arguments (lingerMs, failEvery,
    deliveries)."""
    out = tmp_path / f"{name}.txt"
    proc = start_node(
        start_process,
        tmp_path / "node-home",
        name,
        "alions_consume.js",
        [namesrv, TOPIC, group, expression, str(expected), "40000", str(out), *extra],
        CONSUMED,
    )
    return out, proc


async def consumed(out: Path, proc: ManagedProcess) -> list[Received]:
    """Wait for a consumer started by ``start_consumer``; it must have seen no
    'error' event (e.g. a failed offset query or send-back); its records."""
    result = await finish(proc, CLIENT_TIMEOUT_S)
    assert result["errors"] == "0", proc.tail()
    return read_received(out)


async def produce(
    start_process: StartProcess, tmp_path: Path, namesrv: str, sent: list[Sent]
) -> None:
    """Send ``sent`` (from ``expected_messages``) with an ali-ons producer; no errors."""
    prefix = sent[0].key[:-6]
    proc = start_node(
        start_process,
        tmp_path / "node-home",
        f"alions-produce-{prefix}",
        "alions_produce.js",
        [namesrv, TOPIC, str(len(sent)), prefix, "8", str(tmp_path / f"{prefix}.results")],
        PRODUCED,
    )
    result = await finish(proc, CLIENT_TIMEOUT_S)
    assert (result["count"], result["errors"]) == (str(len(sent)), "0"), proc.tail()


def send_results(path: Path) -> dict[str, tuple[int, int]]:
    """``alions_produce.js`` results: key -> (queueId, queueOffset) of its SendResult."""
    out = {}
    for line in path.read_text("utf-8").splitlines():
        key, queue_id, offset = line.split(" ")
        out[key] = (int(queue_id), int(offset))
    return out


async def test_alions_produces_and_consumes_with_tag_filter(
    start_process: StartProcess, tmp_path: Path
) -> None:
    node_or_fail()
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv)
    await create_topic(start_process, tmp_path, namesrv)
    first = expected_messages(3000, "a")
    await produce(start_process, tmp_path, namesrv, first)
    wanted = [m for m in first if m.tag in ("TagA", "TagB")]
    ab_out, ab = start_consumer(
        start_process, tmp_path, namesrv, "ab1", "CID_ab", "TagA || TagB", len(wanted)
    )
    all_out, every = start_consumer(
        start_process, tmp_path, namesrv, "all", "CID_all", "*", len(first)
    )
    assert_once_in_topic(await consumed(ab_out, ab), wanted)
    everything = await consumed(all_out, every)
    assert_once_in_topic(everything, first)
    # Each SendResult (the broker's queueId/queueOffset as ali-ons read them) names
    # where the consumer found that message.
    found = {r.key: (r.queue_id, r.queue_offset) for r in everything}
    assert send_results(tmp_path / "a.results") == found
    # The group committed its offsets when it closed (ali-ons sends -1 for a queue it
    # holds at 0; the broker ignores that): a restart sees only the new messages.
    second = expected_messages(600, "b")
    await produce(start_process, tmp_path, namesrv, second)
    wanted = [m for m in second if m.tag in ("TagA", "TagB")]
    ab_out, ab = start_consumer(
        start_process, tmp_path, namesrv, "ab2", "CID_ab", "TagA || TagB", len(wanted)
    )
    assert_once_in_topic(await consumed(ab_out, ab), wanted)


async def test_alions_retry_goes_back_through_the_broker(
    start_process: StartProcess, tmp_path: Path
) -> None:
    node_or_fail()
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv)
    await create_topic(start_process, tmp_path, namesrv)
    sent = expected_messages(300, "f")
    failed = [m for m in sent if int(m.key[1:]) % 10 == 0]
    await produce(start_process, tmp_path, namesrv, sent)
    # The first delivery of every tenth message answers ACTION_RETRY: ali-ons sends
    # it back (CONSUMER_SEND_MSG_BACK, delay level 0: the broker picks 3 + reconsume
    # times, 10 s), and gets it again from %RETRY%CID_retry, with reconsumeTimes 1
    # and its own topic back (from the RETRY_TOPIC property the broker set).
    out, proc = start_consumer(
        start_process,
        tmp_path,
        namesrv,
        "retry",
        "CID_retry",
        "*",
        len(sent),
        "1000",
        "10",
        str(len(sent) + len(failed)),
    )
    records = await consumed(out, proc)  # no error event: every send-back succeeded
    assert_once_in_topic([r for r in records if r.reconsume_times == 0], sent)
    again = [r for r in records if r.reconsume_times != 0]
    assert_exactly_once(again, failed)
    assert {(r.reconsume_times, r.topic) for r in again} == {(1, TOPIC)}
    assert {r.topic for r in records} == {TOPIC}
