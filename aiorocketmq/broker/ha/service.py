"""HAService: one facade over the master or slave side, chosen by ``brokerRole``.

Owns: building ``HAServer`` (ASYNC_MASTER, SYNC_MASTER) or ``HAClient`` (SLAVE)
for a store, installing the SYNC_MASTER replica waiter and the master's arrival
listener into the store, their start/shutdown, and the HA keys of
GET_BROKER_RUNTIME_INFO (``runtime_info``).

Runtime-info keys (all values strings, as Java's ``HashMap<String, String>``):

* master: ``haSlaveNum``; ``haPush2SlaveMaxOffset``; ``slaveFallBehindMuch``
  (Java's master/slave diff log figure: max offset - push2SlaveMaxOffset) and
  its alias ``haTransferLag``; per connected slave ``i`` (0-based):
  ``haSlaveAddr_i``, ``haSlaveAckOffset_i``, ``haSlaveLag_i``;
* slave: ``masterAddr`` (the HA address in use, "" when none), ``haConnected``
  ("true"/"false"), ``haMasterOffset`` (end of the last frame received),
  ``haSlaveMaxOffset``, ``slaveFallBehindMuch`` (received, not yet stored) and
  ``haReconnectTimes``.

Must not: wire itself into the broker (the controller calls ``install``,
``start``, ``update_master_address`` and ``runtime_info``), or be started before
``install``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiorocketmq.broker.ha.master import HAServer
from aiorocketmq.broker.ha.slave import HAClient
from aiorocketmq.common.clock import Clock
from aiorocketmq.remoting.tls import TlsConfig
from aiorocketmq.runtime.lifecycle import Service, ServiceStateError
from aiorocketmq.store.config import BrokerRole, MessageStoreConfig
from aiorocketmq.store.message_store import MessageStore

__all__ = ["HAService"]

log = logging.getLogger(__name__)


class HAService(Service):
    """Master or slave replication for one store; see the module docstring.

    Args:
        config: the store's config (``brokerRole``, HA settings).
        host: interface a master's HA listener binds.
        port: override of ``haListenPort`` (0 = any free port); None keeps it.
        clock: housekeeping and heartbeat timing on a master.
        backoff_s, backoff_max_s: a slave's reconnect backoff.
        tls: the master listener's TLS settings (``tls.server.mode``...); None: plaintext.
        client_tls: a slave connects with TLS using these settings; None: plaintext.

    Attributes:
        server: the master side after ``install`` (None on a slave).
        client: the slave side after ``install`` (None on a master).
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        host: str = "0.0.0.0",
        port: int | None = None,
        clock: Clock | None = None,
        backoff_s: float = 0.1,
        backoff_max_s: float = 5.0,
        tls: TlsConfig | None = None,
        client_tls: TlsConfig | None = None,
    ) -> None:
        super().__init__("ha-service")
        self._tls = tls
        self._client_tls = client_tls
        self.config = config
        self.role = config.broker_role
        self._host = host
        self._port = port
        self._clock = clock
        self._backoff = (backoff_s, backoff_max_s)
        self.server: HAServer | None = None
        self.client: HAClient | None = None

    @property
    def is_master(self) -> bool:
        """ASYNC_MASTER or SYNC_MASTER."""
        return self.role is not BrokerRole.SLAVE

    def install(self, store: MessageStore) -> None:
        """Build this role's side for ``store``; on SYNC_MASTER set its replica waiter.

        Raises:
            ServiceStateError: called twice, or after ``start``.
        """
        if self.server is not None or self.client is not None:
            raise ServiceStateError("HAService.install() called twice")
        if self.is_master:
            server = HAServer(
                store, host=self._host, port=self._port, clock=self._clock, tls=self._tls
            )
            self.server = server
            # Writers learn of new data from the dispatcher (ASYNC_MASTER) and from
            # SYNC_MASTER waits (GroupTransfer.on_wait), whichever comes first.
            store.add_arrival_listener(server.on_arrival)
            if self.role is BrokerRole.SYNC_MASTER:
                store.replica_waiter = server.group_transfer.wait
        else:
            backoff_s, backoff_max_s = self._backoff
            self.client = HAClient(
                store, backoff_s=backoff_s, backoff_max_s=backoff_max_s, tls=self._client_tls
            )

    async def on_start(self) -> None:
        side = self.server or self.client
        if side is None:
            raise ServiceStateError("HAService.start() before install()")
        await side.start()
        log.info("HA service started role=%s", self.role.value)

    async def on_shutdown(self) -> None:
        side = self.server or self.client
        if side is not None:
            await side.shutdown()

    @property
    def ha_port(self) -> int | None:
        """The master's bound HA port (after start), None on a slave."""
        return self.server.port if self.server is not None else None

    @property
    def fixed_master_address(self) -> bool:
        """Whether ``haMasterAddress`` is configured (Java: set when >= 6 chars)."""
        address = self.config.ha_master_address
        return address is not None and len(address) >= 6

    def update_master_address(self, addr: str | None) -> None:
        """A slave's master HA address (from the name server); ignored on a master,
        and on a slave with a configured ``haMasterAddress`` (Java's
        ``updateMasterHAServerAddrPeriodically`` is false then: the configured
        address, e.g. a proxy or NAT address, wins over the registration reply)."""
        if self.client is not None and not self.fixed_master_address:
            self.client.update_master_address(addr)

    def set_slave_listener(self, listener: Callable[[str], None] | None) -> None:
        """A master: call ``listener(addr)`` when a slave connects and sends its
        first offset report (``HAServer.on_slave_connected``); ignored on a slave."""
        if self.server is not None:
            self.server.on_slave_connected = listener

    def slave_fall_behind_much(self) -> int:
        """Master: max offset - push2SlaveMaxOffset; slave: received, not stored."""
        if self.server is not None:
            return self.server.slave_fall_behind_much()
        if self.client is not None:
            return self.client.lag
        return 0

    def runtime_info(self) -> dict[str, str]:
        """The HA keys of GET_BROKER_RUNTIME_INFO (see the module docstring)."""
        if self.server is not None:
            return _master_info(self.server)
        if self.client is not None:
            return _slave_info(self.client)
        return {}


def _master_info(server: HAServer) -> dict[str, str]:
    max_offset = server.store.max_phy_offset
    lag = str(server.slave_fall_behind_much())
    info = {
        "haSlaveNum": str(server.connection_count),
        "haPush2SlaveMaxOffset": str(server.push2slave_max_offset),
        "slaveFallBehindMuch": lag,
        "haTransferLag": lag,
    }
    for i, conn in enumerate(server.connections):
        info[f"haSlaveAddr_{i}"] = conn.addr
        info[f"haSlaveAckOffset_{i}"] = str(conn.ack_offset)
        info[f"haSlaveLag_{i}"] = str(max_offset - conn.ack_offset if conn.ack_offset >= 0 else -1)
    return info


def _slave_info(client: HAClient) -> dict[str, str]:
    return {
        "masterAddr": client.master_address or "",
        "haConnected": "true" if client.connected else "false",
        "haMasterOffset": str(client.master_offset),
        "haSlaveMaxOffset": str(client.own_offset),
        "slaveFallBehindMuch": str(client.lag),
        "haReconnectTimes": str(client.reconnects),
    }
