"""GET_CONSUMER_OFFSET_HISTORY (ours) on a real store over a real connection: the
recorded series, the live point, the range and point limits, and bad requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.offset_history import HISTORY_FILE, OffsetHistoryService
from aiorocketmq.broker.processors.offset_history import MAX_POINTS, OffsetHistoryProcessor
from aiorocketmq.common.clock import SystemClock
from aiorocketmq.common.offset_history import HistoryReply
from aiorocketmq.remoting.broker_admin_headers import GetConsumerOffsetHistoryRequestHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness
from tests.unit.store.store_support import dispatched, inner, put_ok


class PastClock(SystemClock):
    """Snapshot times a second apart, a minute ago (two never share a millisecond)."""

    def __init__(self) -> None:
        self.next_ms = super().now_ms() - 60_000

    def now_ms(self) -> int:
        self.next_ms += 1_000
        return self.next_ms


class Served:
    """The processor wired into a harness, with the service whose file it reads."""

    service: OffsetHistoryService

    def extra(self, ctx: BrokerContext, table: ProcessorTable) -> None:
        self.service = OffsetHistoryService(
            ctx.offsets,
            ctx.store.config.root_dir / "config" / HISTORY_FILE,
            ctx.store.executor,
            PastClock(),
            interval_ms=1_000,
            max_offset=ctx.store.get_max_offset_in_queue,
        )
        OffsetHistoryProcessor(ctx, self.service).register(table)


def request(group: str = GROUP, **fields: Any) -> RemotingCommand:
    header = GetConsumerOffsetHistoryRequestHeader(group, **fields)
    return RemotingCommand(
        code=RequestCode.GET_CONSUMER_OFFSET_HISTORY, ext_fields=header.to_ext_fields()
    )


async def ask(h: Harness, group: str = GROUP, **fields: Any) -> HistoryReply:
    reply = await h.invoke(request(group, **fields))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return HistoryReply.decode(reply.body_bytes())


async def put(h: Harness, n: int, queue_id: int) -> None:
    for i in range(n):
        await put_ok(h.ctx.store, inner(f"m{i}".encode(), queue_id=queue_id))
    await dispatched(h.ctx.store)


async def test_series_is_the_recorded_snapshots_then_the_live_point(tmp_path: Path) -> None:
    served = Served()
    async with harness(tmp_path, extra=served.extra) as h:
        offsets = h.ctx.offsets
        await put(h, 4, 0)
        await put(h, 2, 1)
        offsets.commit_offset("c", GROUP, TOPIC, 0, 1)
        offsets.commit_offset("c", GROUP, TOPIC, 1, 2)
        offsets.commit_offset("c", "other", TOPIC, 0, 0)
        await served.service.snapshot()  # lag 3 + 0
        await put(h, 5, 1)
        offsets.commit_offset("c", GROUP, TOPIC, 0, 4)
        await served.service.snapshot()  # lag 0 + 5
        offsets.commit_offset("c", GROUP, TOPIC, 1, 6)  # live: lag 0 + 1

        reply = await ask(h)
        assert reply.broker_name == h.ctx.config.broker_name
        assert reply.interval == 1_000 and reply.bad_lines == 0
        assert [(p.topic, p.broker_offset, p.consumer_offset, p.diff) for p in reply.points] == [
            (TOPIC, 6, 3, 3),
            (TOPIC, 11, 6, 5),
            (TOPIC, 11, 10, 1),
        ]
        stamps = [p.timestamp for p in reply.points]
        assert stamps == sorted(stamps)

        other = await ask(h, "other")
        assert [p.diff for p in other.points] == [4, 4, 4]
        assert (await ask(h, "nobody")).points == []
        assert (await ask(h, topic="NoSuchTopic")).points == []


async def test_range_and_point_limits(tmp_path: Path) -> None:
    served = Served()
    async with harness(tmp_path, extra=served.extra) as h:
        await put(h, 3, 0)
        h.ctx.offsets.commit_offset("c", GROUP, TOPIC, 0, 0)
        await served.service.snapshot()
        h.ctx.offsets.commit_offset("c", GROUP, TOPIC, 0, 1)
        await served.service.snapshot()
        h.ctx.offsets.commit_offset("c", GROUP, TOPIC, 0, 2)
        recorded = [p.timestamp for p in (await ask(h)).points][:2]

        # The newest snapshots are kept; the live point takes one of the places.
        assert [p.diff for p in (await ask(h, max_points=2)).points] == [2, 1]
        assert [p.diff for p in (await ask(h, max_points=1)).points] == [1]
        # A range that ends before now has no live point.
        past = await ask(h, begin_timestamp=recorded[0], end_timestamp=recorded[0])
        assert [(p.timestamp, p.diff) for p in past.points] == [(recorded[0], 3)]
        later = await ask(h, begin_timestamp=recorded[1])
        assert [p.diff for p in later.points] == [2, 1]
        # maxPoints beyond the cap is the cap, not an error.
        assert len((await ask(h, max_points=MAX_POINTS * 10)).points) == 3


async def test_bad_requests_get_an_error_reply(tmp_path: Path) -> None:
    served = Served()
    async with harness(tmp_path, extra=served.extra) as h:
        for fields in ({"max_points": -1}, {"begin_timestamp": 10, "end_timestamp": 5}):
            reply = await h.invoke(request(**fields))
            assert reply.code == ResponseCode.SYSTEM_ERROR
            assert reply.remark is not None and "maxPoints" in reply.remark
        no_group = RemotingCommand(code=RequestCode.GET_CONSUMER_OFFSET_HISTORY, ext_fields={})
        reply = await h.invoke(no_group)
        assert reply.code != ResponseCode.SUCCESS
        assert reply.remark is not None and "consumerGroup" in reply.remark
