"""BrokerController: builds a broker's parts, wires them and orders their lifecycle.

Owns: the one place where the store, the config managers, the client registries,
the long-polling service, the processors, the remoting server and the name-server
registrar are created and connected, and the order they load, start and stop in
(``BrokerController.initialize/start/shutdown`` in RocketMQ 4.9.8):

* start: load topics.json, consumerOffset.json, subscriptionGroup.json, the store;
  start the store; on a master, request the catch-up of its slaves' offsets
  (QUERY_CONSUMER_OFFSET waits for it, bounded); bind the server (listenPort 0
  picks a free port); start the hold service, the client housekeeping scan
  (every 10 s, channels silent 120 s are closed), the offset flush (every
  flushConsumerOffsetInterval); register with
  every name server, then every 30 s and on topic changes;
* shutdown (idempotent): unregister from the name servers, close the server,
  release held pulls, stop the store (flush, checkpoint, clean marker), then
  persist offsets, topics and subscription groups.

Must not: hold request logic (processors do), or block the loop.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, Final

from aiorocketmq.broker.acl import AclProcessorTable, AclService, resolve_acl_paths
from aiorocketmq.broker.client_registry import ConsumerManager, ProducerManager
from aiorocketmq.broker.config import BrokerSettings
from aiorocketmq.broker.config_manager import (
    CONSUMER_OFFSET_FILE,
    SUBSCRIPTION_GROUP_FILE,
    TOPICS_FILE,
    config_file_path,
)
from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.forced_clean import ForcedCleanLosses
from aiorocketmq.broker.ha.offset_catchup import SlaveOffsetCatchUp
from aiorocketmq.broker.ha.service import HAService
from aiorocketmq.broker.long_polling import PullRequestHoldService
from aiorocketmq.broker.metrics import BrokerMetrics
from aiorocketmq.broker.offset_history import HISTORY_FILE, OffsetHistoryService
from aiorocketmq.broker.offsets import ConsumerOffsetFlushService, ConsumerOffsetManager
from aiorocketmq.broker.outer_api import BrokerIdentity, BrokerOuterAPI
from aiorocketmq.broker.processors.acl_admin import AclAdminProcessor
from aiorocketmq.broker.processors.admin import AdminProcessor
from aiorocketmq.broker.processors.admin_maintenance import MaintenanceProcessor
from aiorocketmq.broker.processors.admin_stats import (
    AdminStatsProcessor,
    BrokerStats,
    StoreStatsSampler,
)
from aiorocketmq.broker.processors.broker_config import BrokerConfigProcessor
from aiorocketmq.broker.processors.broker_consume_stats import BrokerConsumeStatsProcessor
from aiorocketmq.broker.processors.client_manage import (
    ClientManageProcessor,
    ConsumerIdsChangedNotifier,
)
from aiorocketmq.broker.processors.consumer_manage import ConsumerManageProcessor
from aiorocketmq.broker.processors.consumer_relay import ConsumerRelayProcessor
from aiorocketmq.broker.processors.end_transaction import EndTransactionProcessor
from aiorocketmq.broker.processors.offset_history import OffsetHistoryProcessor
from aiorocketmq.broker.processors.pull import PullProcessor
from aiorocketmq.broker.processors.query import QueryProcessor
from aiorocketmq.broker.processors.reset_offset import ResetOffsetProcessor
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.broker.processors.send_back import SendBackProcessor
from aiorocketmq.broker.processors.stats_view import StatsViewProcessor
from aiorocketmq.broker.rebalance_lock import RebalanceLockManager, RebalanceLockProcessor
from aiorocketmq.broker.registration import BrokerRegistrar
from aiorocketmq.broker.schedule import ScheduleMessageService
from aiorocketmq.broker.slave_sync import SlaveSynchronize
from aiorocketmq.broker.stats_windows import (
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    TOPIC_PUT_SIZE,
    StatsWindows,
)
from aiorocketmq.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.broker.timer import TimerMessageService
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.broker.transaction.check_service import TransactionalMessageCheckService
from aiorocketmq.broker.transaction.half_service import TransactionalMessageBridge
from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.common.constants import VIP_CHANNEL_PORT_OFFSET
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.message_store import MessageStore

__all__ = ["BrokerController"]

log = logging.getLogger(__name__)

#: ClientHousekeepingService: scan every 10 s (first after 10 s).
CLIENT_SCAN_INTERVAL_MS: Final = 10_000
#: Whom a broker with no brokerIP1 advertises (the CLI resolves a real address).
DEFAULT_BROKER_IP: Final = "127.0.0.1"


class BrokerController(Service):
    """One broker process's parts.

    Args:
        settings: Everything the properties file configured; ``brokerIP1`` should
            already be resolved (the CLI does it), otherwise 127.0.0.1 is advertised.
        clock: Time source (tests may pass a manual clock).
        total_physical_memory: Override of the host's RAM for the store's
            in-memory threshold (tests).

    Attributes:
        ctx: What the processors share (valid after construction; the store
            host is final once started).
        store, server, registrar, hold: the main parts, for tools and tests.
        fatal: Set when a background part died; the CLI then shuts down.
    """

    def __init__(
        self,
        settings: BrokerSettings,
        *,
        clock: Clock | None = None,
        total_physical_memory: int | None = None,
    ) -> None:
        super().__init__("broker")
        self.settings = settings
        self.clock: Clock = clock or SystemClock()
        self.fatal = asyncio.Event()
        # Services started after the broker's own parts and stopped before them, by a
        # higher layer (the gRPC proxy in local mode: broker never imports it).
        self.extensions: list[Service] = []
        self._executor = BlockingExecutor("broker-config", max_workers=1)
        store_kwargs: dict[str, Any] = {"clock": self.clock}
        if total_physical_memory is not None:
            store_kwargs["total_physical_memory"] = total_physical_memory
        self.store = MessageStore(settings.store, **store_kwargs)
        self.ctx = self._build_context(settings.store.root_dir)
        tls = settings.remoting.tls if settings.remoting.tls.ha_enable else None
        client_tls = tls if tls is not None and settings.client.use_tls else None
        self.ha = HAService(settings.store, tls=tls, client_tls=client_tls)
        self.ha.install(self.store)
        self.forced_clean = ForcedCleanLosses(self.ctx)
        self.store.cleanup_service.on_forced_delete = self.forced_clean.on_forced_delete
        self.metrics = BrokerMetrics(settings, self.ctx, self.ha, self.forced_clean)
        self.acl, self.table = self._build_acl(self.metrics.table)
        self.server = RemotingServer(
            self.metrics.table,
            settings.remoting,
            name="broker",
            extra_port_offsets=(VIP_CHANNEL_PORT_OFFSET,),
        )
        self.pull = PullProcessor(self.ctx)
        self.hold = self.ctx.hold = self._build_hold_service()
        self.notifier = ConsumerIdsChangedNotifier(
            self.server, enabled=settings.broker.notify_consumer_ids_changed_enable
        )
        self._build_offset_services()
        self.locks = RebalanceLockManager(self.clock)
        self.schedule = ScheduleMessageService(self.store, self._executor, clock=self.clock)
        # RocketMQ 5's timed messages (gRPC DELAY, remoting TIMER_* properties).
        self.timer = TimerMessageService(self.ctx)
        self.sampler = StoreStatsSampler(self.store.stats, self.clock)
        self.broker_stats = BrokerStats(self.store.stats, self.clock)
        self.transactions = TransactionalMessageBridge(self.ctx)
        self.transaction_check = TransactionalMessageCheckService(
            self.ctx, self.transactions, invoke_oneway=self.server.invoke_oneway
        )
        self.slave_sync, self.offset_catch_up = self._build_offset_exchange()
        self.registrar = BrokerRegistrar(
            settings.broker,
            self.ctx.topics,
            self.identity,
            BrokerOuterAPI(settings.client),
            on_master=self._on_master,
        )
        self._wire()

    def _build_offset_services(self) -> None:
        cfg = self.settings.broker
        self.offset_history = OffsetHistoryService(
            self.ctx.offsets,
            config_file_path(self.settings.store.root_dir, HISTORY_FILE),
            self._executor,
            self.clock,
            interval_ms=cfg.flush_consumer_offset_history_interval,
            max_offset=self.ctx.store.get_max_offset_in_queue,
        )
        self.offset_flush = ConsumerOffsetFlushService(
            self.ctx.offsets, cfg.flush_consumer_offset_interval
        )

    def _build_offset_exchange(self) -> tuple[SlaveSynchronize, SlaveOffsetCatchUp]:
        """A slave copies its master's metadata; a master learns its slaves' offsets."""
        cfg = self.settings.broker
        slave_sync = SlaveSynchronize(
            self.ctx.topics,
            self.ctx.groups,
            self.ctx.offsets,
            self._install_delay_offsets,
            client_config=self.settings.client,
        )
        # Rounds on masters only: a slave's offsets come from its master (slave_sync).
        catch_up = SlaveOffsetCatchUp(
            broker_name=cfg.broker_name,
            namesrv_addrs=lambda: cfg.namesrv_addr_list,
            own_addr=lambda: self.address,
            offsets=self.ctx.offsets,
            max_offset=self.store.get_max_offset_in_queue,
            delay_offsets=self.schedule.merge_slave_offsets,
            timeout_ms=0 if self.ctx.is_slave else cfg.slave_offset_catch_up_timeout_millis,
            client_config=self.settings.client,
        )
        self.ha.set_slave_listener(catch_up.on_slave_connected if catch_up.enabled else None)
        return slave_sync, catch_up

    def _build_context(self, root: Path) -> BrokerContext:
        cfg = self.settings.broker
        return BrokerContext(
            config=cfg,
            store_config=self.settings.store,
            store=self.store,
            topics=TopicConfigManager(
                config_file_path(root, TOPICS_FILE), self._executor, cfg, self.clock
            ),
            groups=SubscriptionGroupManager(
                config_file_path(root, SUBSCRIPTION_GROUP_FILE), self._executor, cfg, self.clock
            ),
            offsets=ConsumerOffsetManager(
                config_file_path(root, CONSUMER_OFFSET_FILE), self._executor
            ),
            producers=ProducerManager(self.clock),
            consumers=ConsumerManager(self.clock),
            hold=None,
            store_host=(cfg.broker_ip1 or DEFAULT_BROKER_IP, self.settings.remoting.listen_port),
            clock=self.clock,
        )

    def _build_hold_service(self) -> PullRequestHoldService:
        cfg = self.settings.broker
        return PullRequestHoldService(
            clock=self.clock,
            max_offset=self.store.get_max_offset_in_queue,
            rerun=self.pull.rerun,
            long_polling_enable=cfg.long_polling_enable,
            short_polling_ms=cfg.short_polling_time_mills,
            max_held=cfg.max_held_pull_requests,
        )

    def _build_acl(self, table: ProcessorTable) -> tuple[AclService | None, ProcessorTable]:
        """With ``aclEnable``: the ACL service and the guarded table to register in."""
        cfg = self.settings.broker
        if not cfg.acl_enable:
            return None, table
        acl = AclService(
            *resolve_acl_paths(cfg.acl_plain_file, cfg.rocketmq_home),
            watch_interval_ms=cfg.acl_file_watch_interval_millis,
        )
        return acl, AclProcessorTable(table, acl.current)

    def _wire(self) -> None:
        self.pull.register(self.table)
        SendProcessor(self.ctx, self.timer).register(self.table)
        gate = self.offset_catch_up if self.offset_catch_up.enabled else None
        ConsumerManageProcessor(self.ctx, gate).register(self.table)
        ClientManageProcessor(self.ctx).register(self.table)
        RebalanceLockProcessor(self.locks).register(self.table)
        AdminProcessor(self.ctx, delay_offsets=self.schedule.encode).register(self.table)
        MaintenanceProcessor(self.ctx).register(self.table)
        stats = AdminStatsProcessor(
            self.ctx,
            boot_timestamp_ms=self.clock.now_ms(),
            sampler=self.sampler,
            broker_stats=self.broker_stats,
            extra_runtime_info=self.extra_runtime_info,
        )
        stats.register(self.table)
        BrokerConsumeStatsProcessor(self.ctx, stats.consume_stats, lambda: self.address).register(
            self.table
        )
        self.stats_windows = self._build_stats_windows()
        StatsViewProcessor(self.stats_windows).register(self.table)
        SendBackProcessor(self.ctx).register(self.table)
        QueryProcessor(self.ctx).register(self.table)
        EndTransactionProcessor(self.ctx, self.transactions).register(self.table)
        ResetOffsetProcessor(self.ctx, self.server.invoke_oneway).register(self.table)
        ConsumerRelayProcessor(self.ctx, self.server.invoke).register(self.table)
        AclAdminProcessor(self.ctx, self.acl).register(self.table)
        if self.offset_history.enabled:  # else a RocketMQ broker's answer: not supported
            OffsetHistoryProcessor(self.ctx, self.offset_history).register(self.table)
        # mqbroker sets broker_config.config_path to its -c file (updates are persisted).
        self.broker_config = BrokerConfigProcessor(self.ctx, self.settings)
        self.broker_config.register(self.table)
        self.ctx.consumers.set_listener(self.notifier)
        self.store.add_arrival_listener(self.hold.on_arrival)
        self.server.add_connection_listener(on_close=self._on_connection_closed)

    def _build_stats_windows(self) -> StatsWindows:
        """statsAll's counters: stored per topic (store), pulled per topic@group (metrics)."""
        store_stats, metrics = self.store.stats, self.metrics

        def by_group(table: dict[tuple[str, str], int]) -> dict[str, int]:
            return {f"{topic}@{group}": n for (topic, group), n in list(table.items())}

        return StatsWindows(
            {
                TOPIC_PUT_NUMS: lambda: store_stats.topic_put_times,
                TOPIC_PUT_SIZE: lambda: store_stats.topic_put_size,
                GROUP_GET_NUMS: lambda: by_group(metrics.out_messages),
                GROUP_GET_SIZE: lambda: by_group(metrics.out_bytes),
            },
            self.clock,
        )

    # -- identity ----------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``brokerIP1:port``: what clients and name servers are told (once bound)."""
        host, port = self.ctx.store_host
        return f"{host}:{port}"

    @property
    def listen_address(self) -> str:
        """The bound ``host:port`` of the server."""
        return self.server.address

    def identity(self) -> BrokerIdentity:
        """Cluster, name, id and addresses, as registered with name servers."""
        cfg = self.settings.broker
        ha_host = cfg.broker_ip2 or self.ctx.store_host[0]
        return BrokerIdentity(
            cluster_name=cfg.broker_cluster_name,
            broker_name=cfg.broker_name,
            broker_id=cfg.broker_id,
            broker_addr=self.address,
            ha_server_addr=f"{ha_host}:{self.ha.ha_port or self.settings.store.ha_listen_port}",
        )

    # -- lifecycle ---------------------------------------------------------------------

    async def on_start(self) -> None:
        """Load, start the store, bind, start the services, register.

        A failure (port taken, store locked by another broker...) stops whatever
        already started, so the store is closed cleanly, then re-raises.
        """
        try:
            await self._start_parts()
        except BaseException:
            await self.on_shutdown()
            raise
        log.info(
            "broker started name=%s id=%d address=%s role=%s namesrv=%s",
            self.settings.broker.broker_name,
            self.settings.broker.broker_id,
            self.address,
            self.settings.store.broker_role.value,
            self.settings.broker.namesrv_addr or "-",
        )

    async def _start_parts(self) -> None:
        for manager in (self.ctx.topics, self.ctx.offsets, self.ctx.groups):
            await manager.load()
        await self.store.load()
        await self.store.start()
        if self.offset_catch_up.enabled:
            # Before any client connects: queries wait for the slaves' offsets, and
            # the delay table is loaded first so the file cannot undo a raise.
            await self.schedule.load()
            self.offset_catch_up.request("master start")
            await self.offset_catch_up.start()
        await self.ha.start()
        if self.acl is not None:
            await self.acl.start()
        await self.server.start()
        self.ctx.store_host = (self.ctx.store_host[0], self.server.port)
        await self.metrics.start()
        await self.hold.start()
        await self.offset_flush.start()
        await self.offset_history.start()
        await self.sampler.start()
        await self.broker_stats.start()
        await self.stats_windows.start()
        # Master-only work (idle on a slave: the services check the role themselves).
        await self.schedule.start()
        await self.timer.start()
        await self.transaction_check.start()
        if self.ctx.is_slave:
            await self.slave_sync.start()
        self.periodic(
            CLIENT_SCAN_INTERVAL_MS / 1000, self.scan_not_active_channels, name="client-scan"
        )
        for extension in self.extensions:
            await extension.start()
        await self.registrar.start()

    async def on_shutdown(self) -> None:
        """Unregister, stop serving, stop the store, persist the tables."""
        await self.metrics.shutdown()
        for extension in reversed(self.extensions):
            await extension.shutdown()
        await self.registrar.shutdown()
        await self.server.shutdown()
        await self.hold.shutdown()
        await self.notifier.wait_sent()
        for service in (
            self.slave_sync,
            self.offset_catch_up,
            self.transaction_check,
            self.timer,
            self.schedule,
            self.sampler,
            self.broker_stats,
            self.stats_windows,
            self.ha,
            self.offset_history,
        ):
            await service.shutdown()
        if self.acl is not None:
            await self.acl.shutdown()
        await self.store.shutdown()
        await self.offset_flush.shutdown()
        for manager in (self.ctx.topics, self.ctx.groups):
            await manager.flush()
        await self._executor.shutdown()
        log.info(
            "broker stopped name=%s address=%s", self.settings.broker.broker_name, self.address
        )

    def on_task_failed(self, task: asyncio.Task[Any], exc: BaseException) -> None:
        """A background task died: record it and ask the process to stop."""
        super().on_task_failed(task, exc)
        self.fatal.set()

    def extra_runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO keys of the schedule service and of HA."""
        info = {**self.schedule.running_stats(), **self.ha.runtime_info()}
        if self.ctx.is_slave:
            info["slaveSyncTimes"] = str(self.slave_sync.syncs)
        elif self.offset_catch_up.enabled:
            catch_up = self.offset_catch_up
            info["slaveOffsetCatchUpRounds"] = str(catch_up.rounds)
            info["slaveOffsetCatchUpRaised"] = str(catch_up.raised_total)
            info["slaveOffsetCatchUpGateTimeouts"] = str(catch_up.gate_timeouts)
        return info

    # -- master / slave --------------------------------------------------------------

    def _on_master(self, master_addr: str | None, ha_addr: str | None) -> None:
        # A slave learns its master from the name server's registration reply.
        if self.ctx.is_slave:
            self.slave_sync.update_master_address(master_addr)
            self.ha.update_master_address(ha_addr)

    def _install_delay_offsets(self, text: str) -> None:
        self.schedule.apply_master_offsets(text)
        self.schedule.offsets.request_persist()

    # -- housekeeping ------------------------------------------------------------------

    def scan_not_active_channels(self) -> int:
        """ClientHousekeepingService: close producer and consumer channels silent for
        120 s; how many were dropped."""
        dropped = self.ctx.producers.scan_not_active() + self.ctx.consumers.scan_not_active()
        return len(dropped)

    def _on_connection_closed(self, conn: RemotingConnection) -> None:
        self.ctx.producers.on_channel_closed(conn)
        self.ctx.consumers.on_channel_closed(conn)
