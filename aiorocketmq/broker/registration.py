"""Registration of one broker with every name server it knows.

Owns: ``registerBrokerAll`` on start, every ``registerNameServerPeriod`` (clamped to
10..60 s) and at once when the topic table changes (several changes in a burst make
one registration: the periodic job is woken, not called per change); the topic
perms a read-only or write-only broker advertises; what the replies say (a slave's
master and HA addresses, the name servers' order topics); ``unregisterBrokerAll``
on shutdown.

Must not: talk to sockets itself (``BrokerOuterAPI`` does) or wait for a name
server that is down: a failed registration is logged and retried at the next tick.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Final

from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.outer_api import BrokerIdentity, BrokerOuterAPI, RegisterResult
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.common.constants import is_readable, is_writeable
from aiorocketmq.common.topic_config import DataVersion, TopicConfigSerializeWrapper
from aiorocketmq.runtime.lifecycle import Periodic, Service

__all__ = ["BrokerRegistrar", "MasterListener"]

log = logging.getLogger(__name__)

#: Java: the first periodic registration comes 10 s after start (start registers too).
FIRST_PERIODIC_DELAY_MS: Final = 10_000
#: How long shutdown waits for UNREGISTER_BROKER replies.
UNREGISTER_TIMEOUT_MS: Final = 3_000

#: Called with ``(master_addr, ha_server_addr)`` when a slave learns them.
MasterListener = Callable[[str | None, str | None], None]


class BrokerRegistrar(Service):
    """Keeps this broker registered with its name servers.

    Args:
        config: The broker's settings (name servers, identity, period, timeouts).
        topics: The topic table to advertise; its changes trigger a registration.
        identity: A callable giving the current identity (the address is known
            only once the server is bound).
        outer_api: The name-server calls; owned (closed at shutdown).
        on_master: Told of a slave's master address whenever a reply names one.
    """

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicConfigManager,
        identity: Callable[[], BrokerIdentity],
        outer_api: BrokerOuterAPI,
        on_master: MasterListener | None = None,
    ) -> None:
        super().__init__("BrokerRegistrar")
        self._cfg = config
        self._topics = topics
        self._identity = identity
        self._api = outer_api
        self._on_master = on_master
        self._job: Periodic | None = None
        self.registrations = 0
        self.master_addr: str | None = None
        self.ha_server_addr: str | None = None
        self.last_results: list[RegisterResult] = []
        topics.add_change_listener(self._topics_changed)

    @property
    def namesrv_addrs(self) -> list[str]:
        """The name servers, in ``namesrvAddr`` order."""
        return self._cfg.namesrv_addr_list

    async def on_start(self) -> None:
        """Register once now (logged, never fatal), then periodically."""
        await self.register_all()
        self._job = self.periodic(
            self._cfg.register_name_server_period / 1000,
            self.register_all,
            name="register-broker-all",
            initial_delay_s=FIRST_PERIODIC_DELAY_MS / 1000,
        )

    async def on_shutdown(self) -> None:
        """Say goodbye to every name server, then close the connections."""
        if self.namesrv_addrs:
            acked = await self._api.unregister_broker_all(
                self.namesrv_addrs, self._identity(), timeout_ms=UNREGISTER_TIMEOUT_MS
            )
            log.info("unregistered from %d of %d name servers", acked, len(self.namesrv_addrs))
        await self._api.close()

    def _topics_changed(self, _version: DataVersion) -> None:
        if self._job is not None and self.running:
            self._job.wakeup()

    def serialize_wrapper(self) -> TopicConfigSerializeWrapper:
        """The topic table as registered: a broker that is not read-write advertises
        its own perm on every topic (``registerBrokerAll``)."""
        wrapper = self._topics.build_serialize_wrapper()
        perm = self._cfg.broker_permission
        if is_readable(perm) and is_writeable(perm):
            return wrapper
        table = {
            name: dataclasses.replace(tc, perm=perm)
            for name, tc in wrapper.topic_config_table.items()
        }
        return TopicConfigSerializeWrapper(table, wrapper.data_version)

    async def register_all(self) -> list[RegisterResult]:
        """REGISTER_BROKER to every name server now; the answers that came back."""
        if not self.namesrv_addrs:
            return []
        results = await self._api.register_broker_all(
            self.namesrv_addrs,
            self._identity(),
            self.serialize_wrapper(),
            timeout_ms=self._cfg.register_broker_timeout_mills,
            compressed=self._cfg.compressed_register,
        )
        self.registrations += 1
        self.last_results = results
        for result in results:
            self._apply(result)
        return results

    def _apply(self, result: RegisterResult) -> None:
        if result.order_topics:
            self._topics.update_order_topic_config(result.order_topics)
        if result.master_addr and (
            result.master_addr != self.master_addr or result.ha_server_addr != self.ha_server_addr
        ):
            self.master_addr = result.master_addr
            self.ha_server_addr = result.ha_server_addr
            log.info(
                "master is %s (ha %s), from name server %s",
                result.master_addr,
                result.ha_server_addr,
                result.namesrv_addr,
            )
            if self._on_master is not None:
                self._on_master(result.master_addr, result.ha_server_addr)
