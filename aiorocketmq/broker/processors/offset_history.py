"""GET_CONSUMER_OFFSET_HISTORY (7001, ours): a group's lag over time on this broker.

Owns: answering from the offset history file (``OffsetHistoryService`` writes it
every ``flushConsumerOffsetHistoryInterval``) plus one point for the moment of the
request, so a series always ends at "now". RocketMQ has no such request: it keeps
current offsets only, and ``mqadmin lag`` is built on this.

Body (standard JSON)::

    {"brokerName":"broker-a","interval":60000,"badLines":0,
     "points":[{"timestamp":1700000000000,"topic":"T","brokerOffset":15,
                "consumerOffset":12,"diff":3}, ...]}

Points are per topic, summed over the queues the group committed on; ``diff`` is
never negative. At most ``maxPoints`` snapshots (``MAX_POINTS`` when 0 or larger),
evenly thinned with the newest kept. Lines written before queue ends were recorded
give no point.

Must not: read the file on the loop (the executor does), or answer with an error
for a group without history: its answer has the live point only (or none).
"""

from __future__ import annotations

import functools
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.offset_history import OffsetHistoryService, queue_ends
from aiorocketmq.common.offset_history import (
    HistoryReply,
    OffsetSnapshot,
    lag_points,
    read_snapshots,
)
from aiorocketmq.remoting.broker_admin_headers import GetConsumerOffsetHistoryRequestHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection

__all__ = ["MAX_POINTS", "OffsetHistoryProcessor"]

MAX_POINTS: Final = 1440
"""Snapshots per answer at most: a day at the default one-minute interval."""


class OffsetHistoryProcessor:
    """Serves the offset history ``history`` writes, joined with the live offsets."""

    def __init__(self, ctx: BrokerContext, history: OffsetHistoryService) -> None:
        self._ctx = ctx
        self._history = history

    def register(self, table: ProcessorTable) -> None:
        """Register GET_CONSUMER_OFFSET_HISTORY."""
        table.register(RequestCode.GET_CONSUMER_OFFSET_HISTORY, self.get_consumer_offset_history)

    def _live(self, group: str) -> OffsetSnapshot:
        table: dict[str, dict[int, int]] = {}
        offsets: dict[tuple[str, str], dict[int, int]] = {}
        for key, queues in self._ctx.offsets.offset_table().items():
            topic, _, owner = key.partition("@")
            if owner == group:
                table[key] = offsets[(topic, group)] = queues
        ends = queue_ends(table, self._ctx.store.get_max_offset_in_queue)
        return OffsetSnapshot(self._ctx.clock.now_ms(), offsets, ends)

    async def get_consumer_offset_history(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_OFFSET_HISTORY: the recorded series plus the live point."""
        header = GetConsumerOffsetHistoryRequestHeader.from_ext_fields(request.ext_fields)
        if header.max_points < 0 or (
            header.end_timestamp is not None and header.end_timestamp < header.begin_timestamp
        ):
            return request.response_to(
                ResponseCode.SYSTEM_ERROR,
                "maxPoints must be >= 0 and endTimestamp >= beginTimestamp",
            )
        limit = MAX_POINTS if not 0 < header.max_points <= MAX_POINTS else header.max_points
        live = self._live(header.consumer_group)
        wants_live = header.end_timestamp is None or header.end_timestamp >= live.timestamp
        from_file = limit - 1 if wants_live else limit
        snapshots: list[OffsetSnapshot] = []
        bad = 0
        if from_file > 0:
            read = functools.partial(
                read_snapshots,
                self._history.path.parent,
                begin_ms=header.begin_timestamp,
                end_ms=header.end_timestamp,
                contains=f'@{header.consumer_group}"'.encode(),
                limit=from_file,
            )
            snapshots, bad = await self._ctx.store.executor.run(read)
        if wants_live:
            snapshots.append(live)
        points = lag_points(snapshots, header.consumer_group, header.topic)
        reply = HistoryReply(self._ctx.config.broker_name, self._history.interval_ms, bad, points)
        return request.response_to(ResponseCode.SUCCESS, body=reply.encode())
