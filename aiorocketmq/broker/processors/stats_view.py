"""VIEW_BROKER_STATS_DATA (315): one stats item's minute, hour and day figures.

Owns: the request ``mqadmin statsAll`` sends (header ``statsName``, ``statsKey``;
Java 4.9.8's ``AdminBrokerProcessor.ViewBrokerStatsData``) and its body,
``BrokerStatsData`` in fastjson's shape ``{"statsDay": {"avgpt", "sum", "tps"},
"statsHour": {...}, "statsMinute": {...}}``. An unknown name or a key never counted
answers SYSTEM_ERROR "The stats <name> <key> not exist", as Java.

Must not: keep the windows (``broker.stats_windows``).
"""

from __future__ import annotations

import json

from aiorocketmq.broker.stats_windows import StatsWindows
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import ProcessorError

__all__ = ["StatsViewProcessor"]


class StatsViewProcessor:
    """VIEW_BROKER_STATS_DATA for one broker.

    Args:
        windows: the broker's sampled counters.
    """

    def __init__(self, windows: StatsWindows) -> None:
        self._windows = windows

    def register(self, table: ProcessorTable) -> None:
        """Route code 315 here."""
        table.register(RequestCode.VIEW_BROKER_STATS_DATA, self.view_broker_stats_data)

    def view_broker_stats_data(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """The three windows of ``statsName`` / ``statsKey``."""
        fields = request.ext_fields or {}
        name, key = str(fields.get("statsName", "")), str(fields.get("statsKey", ""))
        try:
            stats = self._windows.stats(name, key)
        except KeyError:
            stats = None
        if stats is None:
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        body = {
            "statsDay": stats["day"].to_json_dict(),
            "statsHour": stats["hour"].to_json_dict(),
            "statsMinute": stats["minute"].to_json_dict(),
        }
        return request.response_to(
            ResponseCode.SUCCESS, body=json.dumps(body, separators=(",", ":")).encode()
        )
