"""The handle ``rocketmq_cluster`` yields, and the factory that makes them.

Owns: starting a layout (a shipped or project layout's name, or a ``Layout`` built with
``aiorocketmq.deploy.standard_layout``) on free loopback ports in a temporary
directory with small store files, the handle's conveniences (node roles and
addresses, async variants of the blocking calls), and stopping every process it
started, by PID, at teardown.

Must not: reimplement the launcher (``aiorocketmq.deploy.Cluster``) or import
pytest (``plugin`` does).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from aiorocketmq.deploy.cluster import READY_TIMEOUT_S, Cluster, ClusterError
from aiorocketmq.deploy.layout import Layout, load_layout

__all__ = ["SMALL_FILES", "ClusterFactory", "ClusterHandle", "NodeInfo"]

#: Broker settings the fixture applies first (yours win): 4 MiB CommitLog files,
#: 6,000-entry ConsumeQueue files and ~0.5 MiB index files (all are fallocated), so a
#: test cluster starts fast and stays small on disk.
SMALL_FILES: Mapping[str, object] = MappingProxyType(
    {
        "mappedFileSizeCommitLog": 4 * 1024 * 1024,
        "mappedFileSizeConsumeQueue": 6_000 * 20,
        "maxHashSlotNum": 5_000,
        "maxIndexNum": 20_000,
    }
)


@dataclass(frozen=True)
class NodeInfo:
    """One node of a running test cluster.

    Attributes:
        name: ``namesrv-1``, ``broker-a``, ``broker-a-s``...
        role: ``NAMESRV``, ``SYNC_MASTER``, ``ASYNC_MASTER`` or ``SLAVE``.
        address: ``127.0.0.1:<port>``.
        broker_name: The broker group ("" for name servers).
        broker_id: 0 for a master, 1+ for a slave, -1 for a name server.
        grpc_address: ``127.0.0.1:<port>`` of a broker's RocketMQ 5 gRPC endpoint, the
            access point of the 5.x SDKs ("" for name servers).
    """

    name: str
    role: str
    address: str
    broker_name: str
    broker_id: int
    grpc_address: str = ""


class ClusterHandle(Cluster):
    """A started cluster (``aiorocketmq.deploy.Cluster``) plus test conveniences.

    Blocking calls (``kill``, ``stop``, ``restart``, ``wait_registered``,
    ``wait_caught_up``) have ``*_async`` twins for ``async def`` tests, which keep
    the test's event loop running while they wait.
    """

    @property
    def nodes(self) -> dict[str, NodeInfo]:
        """Every node by name, name servers first."""
        return {
            n.name: NodeInfo(
                n.name,
                n.role,
                self.address(n.name),
                n.broker_name,
                n.broker_id,
                self.grpc_address(n.name),
            )
            for n in self.layout.nodes
        }

    def role(self, name: str) -> str:
        """Node ``name``'s role (``NAMESRV``, ``SYNC_MASTER``, ``SLAVE``...)."""
        return self.layout.node(name).role

    @property
    def masters(self) -> list[str]:
        """Names of the master brokers."""
        return [n.name for n in self.layout.brokers if not n.is_slave]

    @property
    def slaves(self) -> list[str]:
        """Names of the slave brokers."""
        return [n.name for n in self.layout.brokers if n.is_slave]

    def pid(self, name: str) -> int | None:
        """Node ``name``'s PID while it runs, else None."""
        proc = self.process(name)
        return proc.pid if proc.running else None

    async def kill_async(self, name: str) -> None:
        """``kill`` without blocking the event loop."""
        await asyncio.to_thread(self.kill, name)

    async def stop_async(self, name: str) -> None:
        """``stop`` without blocking the event loop."""
        await asyncio.to_thread(self.stop, name)

    async def restart_async(self, name: str, within_s: float = READY_TIMEOUT_S) -> None:
        """``restart`` without blocking the event loop."""
        await asyncio.to_thread(self.restart, name, within_s)


class ClusterFactory:
    """Callable the ``rocketmq_cluster`` fixture yields; ``close`` stops everything."""

    def __init__(self, make_dir: Callable[[str], Path]) -> None:
        self._make_dir = make_dir
        self._clusters: list[ClusterHandle] = []
        self._count = itertools.count(1)

    def __call__(
        self,
        layout: str | Layout = "1m",
        *,
        settings: Mapping[str, Any] | None = None,
        timeout: float = READY_TIMEOUT_S,
    ) -> ClusterHandle:
        """Start ``layout`` on free loopback ports and wait until every broker is
        registered with every name server.

        Args:
            layout: A layout name (``1m``, ``2m-2s-sync``, ``2m-2s-async`` ship with
                the package; ``$AIOROCKETMQ_LAYOUTS`` and ``./deploy/conf`` are searched
                first, for your own), a layout
                directory, or a ``Layout`` (``aiorocketmq.deploy.standard_layout``).
            settings: Broker settings for every broker (RocketMQ's names), applied
                after ``SMALL_FILES``.
            timeout: Seconds to wait for registration.

        Raises:
            aiorocketmq.deploy.LayoutError: Unknown layout.
            aiorocketmq.deploy.ProcessError: A node failed to start.
            aiorocketmq.deploy.ClusterError: Not registered within ``timeout``.
        """
        spec = load_layout(layout) if isinstance(layout, str) else layout
        directory = self._make_dir(f"rocketmq-{spec.name}-{next(self._count)}")
        overrides = {**SMALL_FILES, **(settings or {})}
        base = Cluster.create(spec, directory, port_base=0, overrides=overrides)
        cluster = ClusterHandle(base.layout, base.directory, base.overrides)
        cluster.die_with_parent = True  # a killed test run leaves no cluster behind
        self._clusters.append(cluster)
        try:
            cluster.up(timeout)
        except (ClusterError, RuntimeError):
            cluster.down()
            raise
        return cluster

    def close(self) -> dict[str, int | None]:
        """Stop every cluster this factory started (SIGTERM, then SIGKILL by PID);
        exit codes by ``<dir>/<node>``."""
        codes: dict[str, int | None] = {}
        for cluster in reversed(self._clusters):
            for name, code in cluster.down().items():
                codes[f"{cluster.directory.name}/{name}"] = code
        self._clusters.clear()
        return codes
