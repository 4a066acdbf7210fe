"""GET_BROKER_CONSUME_STATS (317): every group's consume stats on this broker.

Owns: Java 4.9.8's ``AdminBrokerProcessor.fetchAllConsumeStatsInBroker``, what
``mqadmin brokerConsumeStats`` asks: for every subscription group, one
``ConsumeStats`` per topic it has offsets in (the rules of GET_CONSUME_STATS:
topics without config, or not subscribed by the group's online clients, are
skipped; with ``isOrder`` only ordered topics), and the total of not yet consumed
messages.

Must not: compute a group's offsets itself (``AdminStatsProcessor.consume_stats``).
"""

from __future__ import annotations

from collections.abc import Callable

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.common.admin_bodies import ConsumeStats
from aiorocketmq.common.consume_stats_list import ConsumeStatsList
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection

__all__ = ["BrokerConsumeStatsProcessor", "ConsumeStatsOf"]

ConsumeStatsOf = Callable[..., ConsumeStats]
"""``AdminStatsProcessor.consume_stats(group, topics, order_only=...)``."""


class BrokerConsumeStatsProcessor:
    """GET_BROKER_CONSUME_STATS for one broker.

    Args:
        ctx: the broker's parts.
        consume_stats: one group's stats over some topics (the stats processor's).
        broker_addr: what the reply names as ``brokerAddr`` (read when asked).
    """

    def __init__(
        self, ctx: BrokerContext, consume_stats: ConsumeStatsOf, broker_addr: Callable[[], str]
    ) -> None:
        self._ctx = ctx
        self._consume_stats = consume_stats
        self._broker_addr = broker_addr

    def register(self, table: ProcessorTable) -> None:
        """Route code 317 here."""
        table.register(RequestCode.GET_BROKER_CONSUME_STATS, self.get_broker_consume_stats)

    def get_broker_consume_stats(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """The ``ConsumeStatsList`` of every subscription group."""
        order_only = str((request.ext_fields or {}).get("isOrder", "false")).lower() == "true"
        body = ConsumeStatsList(broker_addr=self._broker_addr())
        for group in sorted(self._ctx.groups.subscription_group_table()):
            per_topic = []
            for topic in sorted(self._ctx.offsets.which_topic_by_consumer(group)):
                stats = self._consume_stats(group, [topic], order_only=order_only)
                if stats.offset_table:
                    per_topic.append(stats)
                    body.total_diff += stats.compute_total_diff()
            body.groups.append((group, per_topic))
        return request.response_to(ResponseCode.SUCCESS, body=body.encode())
