"""NamesrvController: wires the name server together and orders its lifecycle.

Owns: building the RouteInfoManager, KVConfigManager, processors and
RemotingServer from the configs; the broker expiry scan (every
``brokerScanIntervalMillis``, first after ``brokerScanInitialDelayMillis``); the
connection-close hook that evicts a broker at once when the connection it
registered on closes; start (load KV config, bind, scan) and an idempotent
shutdown (stop scanning, close connections, stop the file thread).

Must not: hold route rules (``route_info.py``), parse requests (``processors.py``)
or read the environment (the CLI does). Composition root: wiring only.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.common.properties_file import format_properties
from aiorocketmq.namesrv.config import NamesrvConfig, config_items
from aiorocketmq.namesrv.kv_config import KVConfigManager
from aiorocketmq.namesrv.metrics import NamesrvMetrics
from aiorocketmq.namesrv.processors import NamesrvProcessors
from aiorocketmq.namesrv.route_info import RouteInfoManager
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer
from aiorocketmq.runtime import BlockingExecutor, Periodic, Service

__all__ = ["NamesrvController"]

log = logging.getLogger(__name__)


class NamesrvController(Service):
    """One name server.

    Args:
        config: Its settings; ``kv_config_path`` must already be expanded.
        remoting_config: The remoting server's settings; by default derived from
            ``config`` (which decides the listen host and port either way).
        clock: Time source for broker expiry.

    Attributes:
        route_info: The route tables (tests and tools may read them).
        kv_config: The KV table.
        fatal: Set when a background task died; the CLI then shuts down.
    """

    def __init__(
        self,
        config: NamesrvConfig,
        remoting_config: RemotingServerConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__("namesrv")
        self.config = config
        self.clock: Clock = clock or SystemClock()
        self.route_info = RouteInfoManager(self.clock, config.broker_channel_expired_millis)
        self._executor = BlockingExecutor("namesrv-kv", max_workers=1)
        self.kv_config = KVConfigManager(Path(config.kv_config_path), self._executor)
        self.remoting_config = config.remoting_config(remoting_config)
        self.processors = NamesrvProcessors(
            config,
            self.route_info,
            self.kv_config,
            config_text=self.config_text,
            on_config=self._on_config,
        )
        self.metrics = NamesrvMetrics(self.route_info, config.metrics_port, config.listen_host)
        table: ProcessorTable = self.metrics.table
        self.processors.register(table)
        self.remoting = RemotingServer(table, self.remoting_config, name="namesrv")
        self.remoting.add_connection_listener(on_close=self._on_connection_closed)
        self.scan_job: Periodic | None = None
        self.fatal = asyncio.Event()

    @property
    def address(self) -> str:
        """The bound ``host:port`` (valid once started)."""
        return self.remoting.address

    def _on_config(self, config: NamesrvConfig) -> None:
        self.config = config

    def config_text(self) -> str:
        """Every setting as ``key=value`` lines (GET_NAMESRV_CONFIG, ``--print-config``)."""
        return format_properties(config_items(self.config, self.remoting_config))

    async def on_start(self) -> None:
        """Load the KV table, bind, then start the expiry scan."""
        await self.kv_config.load()
        await self.remoting.start()
        await self.metrics.start()
        self.scan_job = self.periodic(
            self.config.broker_scan_interval_millis / 1000,
            self.scan_not_active_broker,
            name="scan-not-active-broker",
            initial_delay_s=self.config.broker_scan_initial_delay_millis / 1000,
        )
        log.info(
            "name server started address=%s expiry_ms=%d scan_ms=%d",
            self.address,
            self.config.broker_channel_expired_millis,
            self.config.broker_scan_interval_millis,
        )

    async def on_shutdown(self) -> None:
        """Close every connection, then let pending KV writes finish."""
        await self.metrics.shutdown()
        await self.remoting.shutdown()
        await self._executor.shutdown()
        log.info("name server stopped address=%s", self.address)

    def on_task_failed(self, task: asyncio.Task[Any], exc: BaseException) -> None:
        """A background task died: record it and ask the process to stop."""
        super().on_task_failed(task, exc)
        self.fatal.set()

    def scan_not_active_broker(self) -> int:
        """Drop brokers silent past the expiry and close their connections.

        Returns:
            How many brokers were dropped.
        """
        channels = self.route_info.scan_not_active_broker()
        for channel in channels:
            if isinstance(channel, RemotingConnection):
                channel.close()
        return len(channels)

    def _on_connection_closed(self, conn: RemotingConnection) -> None:
        # RocketMQ's BrokerHousekeepingService: a broker's connection is its lease.
        self.route_info.on_channel_destroy(conn.remote_address, conn)
