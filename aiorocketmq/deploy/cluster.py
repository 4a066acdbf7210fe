"""A layout run as local processes on 127.0.0.1: the one launcher behind ``mqcluster``
and the ``aiorocketmq.testing`` pytest plugin.

Run directory (``DIR``)::

    DIR/cluster.json         the layout as run (ports already shifted) and overrides
    DIR/conf/<node>.properties
    DIR/logs/<node>.log      stdout + stderr, appended across restarts
    DIR/run/<node>.pid
    DIR/store/<node>/        storePathRootDir (name servers: their kvConfig.json)

Owns: writing that directory, starting name servers then brokers, waiting for
ready lines and for every broker to be registered with every name server,
SIGKILL / SIGTERM / restart of one node by PID, stopping everything (brokers
first), waiting for slaves to catch up, and the status rows (role, address, metrics
port, PID, CommitLog max offset, slave lag).

Must not: import broker, name-server or client code: it only runs the CLI
processes and talks remoting (``probe``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aiorocketmq.common.properties_file import format_properties_file
from aiorocketmq.deploy import probe
from aiorocketmq.deploy.layout import Layout, LayoutError, NodeSpec, node_properties
from aiorocketmq.deploy.process import (
    BROKER_READY,
    NAMESRV_READY,
    NodeProcess,
    ProcessError,
    free_port_base,
)

__all__ = ["STATE_FILE", "Cluster", "ClusterError", "NodeStatus", "free_layout_base", "run_sync"]

STATE_FILE = "cluster.json"
READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
T = TypeVar("T")


class ClusterError(RuntimeError):
    """The cluster could not be started, found or made to converge."""


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run an async probe from synchronous code, also when the calling thread runs
    (or has set) an event loop: the coroutine runs on a fresh loop in a worker thread."""

    async def main() -> T:
        return await factory()

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mqcluster") as pool:
        return pool.submit(asyncio.run, main()).result()


@dataclass(frozen=True)
class NodeStatus:
    """One row of ``mqcluster status``."""

    name: str
    role: str
    address: str
    pid: int | None
    running: bool
    max_offset: int | None = None
    lag: int | None = None
    #: Port of the node's ``/metrics`` endpoint on 127.0.0.1 (0: off).
    metrics_port: int = 0
    #: Port of a broker's RocketMQ 5 gRPC endpoint (0: off, or a name server).
    grpc_port: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return dataclasses.asdict(self)


class Cluster:
    """A layout's processes under one run directory (see the module docstring)."""

    def __init__(
        self, layout: Layout, directory: Path, overrides: Mapping[str, object] | None = None
    ) -> None:
        self.layout = layout
        self.directory = directory.resolve()
        self.overrides = dict(overrides or {})
        #: Nodes started from now on get SIGTERM when this process dies (Linux):
        #: for test runs and ``--foreground``, not for a detached ``mqcluster up``.
        self.die_with_parent = False
        self._procs = {node.name: self._process(node) for node in layout.nodes}

    # -- creating and opening a run directory ------------------------------------

    @classmethod
    def create(
        cls,
        layout: Layout,
        directory: Path,
        port_base: int | None = None,
        overrides: Mapping[str, object] | None = None,
    ) -> Cluster:
        """Write ``directory``'s state and configuration files for ``layout``.

        ``port_base`` shifts every port so the lowest remoting port becomes it
        (``0`` picks a base where every port, metrics and gRPC included, is free); None keeps
        the layout's ports.

        Raises:
            LayoutError: ``port_base`` moves a port out of range.
            ProcessError: No free base found.
        """
        if port_base == 0:
            port_base = free_layout_base(layout)
        if port_base is not None:
            layout = layout.shifted(port_base)
        cluster = cls(layout, directory, overrides)
        cluster._write_files()
        return cluster

    @classmethod
    def open(cls, directory: Path) -> Cluster:
        """The cluster whose state ``create`` wrote in ``directory``.

        Raises:
            ClusterError: No (readable) state file.
        """
        path = directory / STATE_FILE
        try:
            state = json.loads(path.read_text("utf-8"))
            nodes = tuple(NodeSpec(**n) for n in state["nodes"])
            layout = Layout(str(state["layout"]), nodes)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"no cluster in {directory} ({path}: {exc})") from None
        return cls(layout, directory, state.get("overrides") or {})

    def _write_files(self) -> None:
        state = {
            "layout": self.layout.name,
            "nodes": [dataclasses.asdict(n) for n in self.layout.nodes],
            "overrides": {k: str(v) for k, v in self.overrides.items()},
        }
        for sub in ("conf", "logs", "run", "store"):
            (self.directory / sub).mkdir(parents=True, exist_ok=True)
        for node in self.layout.nodes:
            self._conf_path(node).write_text(self._conf_text(node), "utf-8")
        tmp = self.directory / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n", "utf-8")
        tmp.replace(self.directory / STATE_FILE)

    def _conf_path(self, node: NodeSpec) -> Path:
        return self.directory / "conf" / f"{node.name}.properties"

    def _conf_text(self, node: NodeSpec) -> str:
        store = self.directory / "store" / node.name
        if node.is_namesrv:
            return format_properties_file(
                {
                    "listenPort": node.port,
                    "kvConfigPath": str(store / "kvConfig.json"),
                    "configStorePath": str(store / "namesrv.properties"),
                    "metricsPort": node.metrics_port,
                }
            )
        return node_properties(node, self.namesrv_addr, store, self.overrides)

    def _process(self, node: NodeSpec) -> NodeProcess:
        conf = str(self._conf_path(node))
        if node.is_namesrv:
            module, ready = "aiorocketmq.cli.namesrv", NAMESRV_READY
            args = [
                "-m",
                module,
                "-c",
                conf,
                "--listenPort",
                str(node.port),
                "--bindAddress",
                "127.0.0.1",
            ]
        else:
            module, ready = "aiorocketmq.cli.broker", BROKER_READY
            args = ["-m", module, "-c", conf]
        return NodeProcess(
            node.name,
            args,
            self.directory / "logs" / f"{node.name}.log",
            self.directory / "run" / f"{node.name}.pid",
            ready,
            marker=conf,
        )

    # -- addresses ------------------------------------------------------------------

    @property
    def namesrv_addrs(self) -> list[str]:
        """Name-server addresses."""
        return [f"127.0.0.1:{n.port}" for n in self.layout.namesrvs]

    @property
    def namesrv_addr(self) -> str:
        """Name-server addresses, ``;``-separated (``NAMESRV_ADDR``'s form)."""
        return ";".join(self.namesrv_addrs)

    def address(self, name: str) -> str:
        """``127.0.0.1:<port>`` of node ``name``."""
        return f"127.0.0.1:{self.layout.node(name).port}"

    def grpc_address(self, name: str) -> str:
        """``127.0.0.1:<port>`` of broker ``name``'s RocketMQ 5 gRPC endpoint ("" if off:
        a name server, or ``grpcListenPort=0``)."""
        port = self.layout.node(name).grpc_port
        return f"127.0.0.1:{port}" if port else ""

    def process(self, name: str) -> NodeProcess:
        """Node ``name``'s process handle.

        Raises:
            LayoutError: No such node.
        """
        self.layout.node(name)
        return self._procs[name]

    def running(self, name: str) -> bool:
        """Whether node ``name`` runs."""
        return self.process(name).running

    # -- starting ---------------------------------------------------------------------

    def start_node(self, name: str, wait: bool = True) -> None:
        """Start node ``name`` unless it runs; wait for its ready line when ``wait``."""
        proc = self.process(name)
        if proc.running:
            return
        proc.spawn(cwd=self.directory, die_with_parent=self.die_with_parent)
        if wait:
            proc.wait_ready(READY_TIMEOUT_S)

    def up(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Start what is not running (name servers first) and wait until every broker
        is registered with every name server.

        Raises:
            ProcessError: A node exited or did not print its ready line.
            ClusterError: Not registered within ``timeout``.
        """
        for group in (self.layout.namesrvs, self.layout.brokers):
            started = [n.name for n in group if not self.running(n.name)]
            for name in started:
                self.start_node(name, wait=False)
            for name in started:
                self._procs[name].wait_ready(READY_TIMEOUT_S)
        self.wait_registered(timeout)

    # -- stopping -----------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """SIGKILL node ``name`` by PID and wait until it is gone."""
        self.process(name).kill()

    def stop(self, name: str, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM node ``name`` and wait (SIGKILL after ``timeout``)."""
        self.process(name).terminate(timeout)

    def restart(self, name: str, timeout: float = READY_TIMEOUT_S) -> None:
        """Stop node ``name`` if it runs, start it, wait until registered."""
        self.stop(name)
        self.start_node(name)
        self.wait_registered(timeout)

    def down(self, timeout: float = STOP_TIMEOUT_S) -> dict[str, int | None]:
        """SIGTERM every node (slaves, masters, then name servers), wait, SIGKILL
        leftovers; exit codes of the nodes this process started."""
        order = [
            [n for n in self.layout.brokers if n.is_slave],
            [n for n in self.layout.brokers if not n.is_slave],
            self.layout.namesrvs,
        ]
        for group in order:
            procs = [self._procs[n.name] for n in group]
            signalled = [p for p in procs if p.signal(signal.SIGTERM)]
            deadline = time.monotonic() + timeout
            for proc in signalled:
                if not proc.wait_gone(max(0.0, deadline - time.monotonic())):
                    proc.kill()
        return {name: proc.exit_code() for name, proc in self._procs.items()}

    # -- convergence -----------------------------------------------------------------

    def _running_brokers(self) -> dict[str, tuple[str, int]]:
        return {
            self.address(n.name): (n.broker_name, n.broker_id)
            for n in self.layout.brokers
            if self.running(n.name)
        }

    async def wait_registered_async(self, within_s: float = READY_TIMEOUT_S) -> None:
        """Wait until every running broker is registered with every running name server.

        Raises:
            ClusterError: Not within ``within_s``.
        """
        deadline = time.monotonic() + within_s
        while True:
            namesrvs = [self.address(n.name) for n in self.layout.namesrvs if self.running(n.name)]
            missing = await probe.missing_registrations(namesrvs, self._running_brokers())
            if not missing:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"not registered after {within_s:.0f} s: {', '.join(missing)}")
            await asyncio.sleep(0.1)

    def wait_registered(self, timeout: float = READY_TIMEOUT_S) -> None:
        """``wait_registered_async`` for synchronous callers."""
        run_sync(lambda: self.wait_registered_async(timeout))

    async def wait_caught_up_async(self, within_s: float = READY_TIMEOUT_S) -> dict[str, int]:
        """Wait until each running slave's CommitLog reaches its running master's
        max offset as read now; those offsets by slave name.

        Raises:
            ClusterError: Not within ``within_s``.
        """
        pairs = []
        for slave in self.layout.brokers:
            master = self.layout.master_of(slave) if slave.is_slave else None
            if master is not None and self.running(slave.name) and self.running(master.name):
                pairs.append((slave.name, master.name))
        masters = await probe.runtime_infos([self.address(m) for _, m in pairs])
        targets = {s: _max_offset(masters[self.address(m)]) for s, m in pairs}
        deadline = time.monotonic() + within_s
        while True:
            infos = await probe.runtime_infos([self.address(s) for s in targets])
            at = {s: _max_offset(infos[self.address(s)]) for s in targets}
            behind = {s: (at[s], t) for s, t in targets.items() if _behind(at[s], t)}
            if not behind:
                return {s: t for s, t in targets.items() if t is not None}
            if time.monotonic() > deadline:
                raise ClusterError(f"slaves behind after {within_s:.0f} s (at, target): {behind}")
            await asyncio.sleep(0.1)

    def wait_caught_up(self, timeout: float = READY_TIMEOUT_S) -> dict[str, int]:
        """``wait_caught_up_async`` for synchronous callers."""
        return run_sync(lambda: self.wait_caught_up_async(timeout))

    async def create_topic_async(
        self, topic: str, queues: int = 4, perm: int = 6, within_s: float = READY_TIMEOUT_S
    ) -> None:
        """Create ``topic`` (``queues`` read and write queues) on every running master
        and wait until every running slave has it too (a slave learns topics by its
        periodic metadata sync, as in RocketMQ, which refuses topic updates on slaves).

        Raises:
            ClusterError: A master refused or did not answer, or a slave did not
                learn the topic within ``within_s``.
        """
        running = [n for n in self.layout.brokers if self.running(n.name)]
        masters = [self.address(n.name) for n in running if not n.is_slave]
        errors = await asyncio.gather(
            *(probe.create_topic(a, topic, queues, perm) for a in masters)
        )
        failed = [e for e in errors if e is not None]
        if failed:
            raise ClusterError(f"cannot create topic {topic}: {'; '.join(failed)}")
        slaves = [self.address(n.name) for n in running if n.is_slave]
        deadline = time.monotonic() + within_s
        while slaves:
            found = await asyncio.gather(*(probe.has_topic(a, topic) for a in slaves))
            slaves = [a for a, ok in zip(slaves, found, strict=True) if not ok]
            if slaves and time.monotonic() > deadline:
                raise ClusterError(f"slaves {slaves} did not sync topic {topic}")
            if slaves:
                await asyncio.sleep(0.2)

    def create_topic(
        self, topic: str, queues: int = 4, perm: int = 6, timeout: float = READY_TIMEOUT_S
    ) -> None:
        """``create_topic_async`` for synchronous callers."""
        run_sync(lambda: self.create_topic_async(topic, queues, perm, timeout))

    # -- status -----------------------------------------------------------------------

    async def status_async(self) -> list[NodeStatus]:
        """One row per node: role, address, PID, running, CommitLog max offset,
        for a slave whose master answers its lag in bytes, its metrics and gRPC ports."""
        running = {n.name: self.running(n.name) for n in self.layout.nodes}
        brokers = [n for n in self.layout.brokers if running[n.name]]
        infos = await probe.runtime_infos([self.address(n.name) for n in brokers])
        offsets = {n.name: _max_offset(infos[self.address(n.name)]) for n in brokers}
        rows = []
        for node in self.layout.nodes:
            offset = offsets.get(node.name)
            lag = None
            master = self.layout.master_of(node) if node.is_slave else None
            if master is not None and offset is not None and offsets.get(master.name) is not None:
                lag = max(0, (offsets[master.name] or 0) - offset)
            rows.append(
                NodeStatus(
                    node.name,
                    node.role,
                    self.address(node.name),
                    self._procs[node.name].pid if running[node.name] else None,
                    running[node.name],
                    offset,
                    lag,
                    node.metrics_port,
                    node.grpc_port,
                )
            )
        return rows

    def status(self) -> list[NodeStatus]:
        """``status_async`` for synchronous callers."""
        return run_sync(self.status_async)


def free_layout_base(layout: Layout) -> int:
    """A ``port_base`` for ``layout.shifted`` at which every port the layout binds
    (remoting, metrics, gRPC) is free on 127.0.0.1 now.

    Raises:
        ProcessError: No such base found.
    """
    low_all, low = min(layout.all_ports()), min(layout.ports())
    # free_port_base wants offsets >= 0: count from the lowest port of all (often a
    # metrics port), then turn its answer into the base of the lowest remoting port.
    return free_port_base(p - low_all for p in layout.all_ports()) + (low - low_all)


def _behind(at: int | None, target: int | None) -> bool:
    return target is None or at is None or at < target


def _max_offset(info: Mapping[str, str] | None) -> int | None:
    if info is None or "commitLogMaxOffset" not in info:
        return None
    try:
        return int(info["commitLogMaxOffset"])
    except ValueError:
        return None


# Re-exported for callers that catch everything the launcher raises.
LauncherErrors = (ClusterError, ProcessError, LayoutError)
