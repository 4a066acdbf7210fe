"""Cluster layouts: which name servers and brokers a cluster has, and their settings.

A layout is a directory holding one RocketMQ ``.properties`` file per broker
(``broker-a.properties``, ``broker-a-s.properties``, ...) and an optional manifest
``layout.properties`` (``namesrvPorts=9876;9877``, ``metricsPortBase=5557``,
``grpcPortBase=8081``). The shipped layouts (``1m``, ``2m-2s-sync``, ``2m-2s-async``)
are package data under ``aiorocketmq/deploy/layouts/`` and are found with
``importlib.resources``, so an installed wheel has them; the same files feed
docker-compose.

Every node gets its own Prometheus ``/metrics`` port: a broker file's ``metricsPort``
if it sets one (0 turns the endpoint off), else the next free one counting from
``metricsPortBase`` (default 5557), brokers first in layout order, then name servers.
So ``1m`` serves broker-a on 5557 and the name server on 5558, the two daemons'
own defaults.

Every broker likewise gets its own RocketMQ 5 gRPC endpoint (``grpcListenPort``): its
file's value (0 turns it off), else the next free one from ``grpcPortBase`` (default
8081, RocketMQ 5's proxy port) in layout order. The shipped layouts name theirs:
broker-a 8081, broker-a-s 8082, broker-b 8083, broker-b-s 8084.

Owns: finding a layout by name, parsing it into ``NodeSpec`` rows (name servers
first, then brokers ordered by brokerName and brokerId), building a layout in
memory (``standard_layout``), shifting every port by a base (``--port-base``),
and rendering the settings one local run of a node gets (loopback address,
store under the run directory, the name-server list, its metrics and gRPC ports).

Must not: start processes or open sockets (``aiorocketmq.deploy.launcher``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from aiorocketmq.common.constants import VIP_CHANNEL_PORT_OFFSET
from aiorocketmq.common.properties_file import format_properties_file, parse_properties_bytes

__all__ = [
    "LAYOUTS_ENV",
    "Layout",
    "LayoutError",
    "NodeSpec",
    "find_layout_dir",
    "layout_search_path",
    "load_layout",
    "node_properties",
    "shipped_layouts",
    "standard_layout",
]

#: A ``os.pathsep``-separated list of directories holding layouts, searched first.
LAYOUTS_ENV = "AIOROCKETMQ_LAYOUTS"
MANIFEST = "layout.properties"
NAMESRV = "NAMESRV"
DEFAULT_NAMESRV_PORT = 9876
#: The broker's own default ``metricsPort``; the name server's is the next one.
DEFAULT_METRICS_PORT_BASE = 5557
#: RocketMQ 5's proxy gRPC port, the broker's own ``grpcListenPort`` default.
DEFAULT_GRPC_PORT_BASE = 8081
PROPERTIES_SUFFIX = ".properties"
MAX_PORT = 65535
# Keys a local run always sets itself (the layout's values are for compose).
_RUN_KEYS = (
    "listenPort",
    "haListenPort",
    "brokerIP1",
    "storePathRootDir",
    "namesrvAddr",
    "metricsPort",
    "grpcListenPort",
)


class LayoutError(ValueError):
    """A layout is missing or its files are inconsistent."""


@dataclass(frozen=True)
class NodeSpec:
    """One process of a layout.

    Attributes:
        name: Node name (``namesrv-1``, ``broker-a``, ``broker-a-s``).
        role: ``NAMESRV`` or the broker's brokerRole.
        port: Listen port.
        ha_port: Broker HA port (0 for name servers).
        broker_name: brokerName ("" for name servers).
        broker_id: brokerId (-1 for name servers).
        properties: The broker's other settings, RocketMQ's names.
        metrics_port: Port of its Prometheus ``/metrics`` endpoint (0: off).
        grpc_port: Broker's RocketMQ 5 gRPC endpoint port (0: off, and for name servers).
    """

    name: str
    role: str
    port: int
    ha_port: int = 0
    broker_name: str = ""
    broker_id: int = -1
    properties: Mapping[str, str] = field(default_factory=dict)
    metrics_port: int = 0
    grpc_port: int = 0

    @property
    def is_namesrv(self) -> bool:
        """Whether this node is a name server."""
        return self.role == NAMESRV

    @property
    def is_slave(self) -> bool:
        """Whether this node is a slave broker."""
        return self.role == "SLAVE"


@dataclass(frozen=True)
class Layout:
    """A cluster: name servers, then brokers."""

    name: str
    nodes: tuple[NodeSpec, ...]

    @property
    def namesrvs(self) -> list[NodeSpec]:
        """The name servers, in order."""
        return [n for n in self.nodes if n.is_namesrv]

    @property
    def brokers(self) -> list[NodeSpec]:
        """The brokers, masters before their slaves."""
        return [n for n in self.nodes if not n.is_namesrv]

    def node(self, name: str) -> NodeSpec:
        """The node called ``name``.

        Raises:
            LayoutError: No such node.
        """
        for node in self.nodes:
            if node.name == name:
                return node
        known = ", ".join(n.name for n in self.nodes)
        raise LayoutError(f"layout {self.name} has no node {name!r} (nodes: {known})")

    def master_of(self, slave: NodeSpec) -> NodeSpec | None:
        """The master (brokerId 0) of ``slave``'s broker group, if the layout has it."""
        for node in self.brokers:
            if node.broker_name == slave.broker_name and node.broker_id == 0:
                return node
        return None

    def ports(self) -> list[int]:
        """Every remoting port (listen and HA) of the layout."""
        return [p for n in self.nodes for p in (n.port, n.ha_port) if p]

    def metrics_ports(self) -> list[int]:
        """Every ``/metrics`` port of the layout (nodes with metrics off have none)."""
        return [n.metrics_port for n in self.nodes if n.metrics_port]

    def grpc_ports(self) -> list[int]:
        """Every broker's gRPC endpoint port (brokers with it off have none)."""
        return [n.grpc_port for n in self.nodes if n.grpc_port]

    def vip_ports(self) -> list[int]:
        """Every broker's VIP channel port (``listenPort - 2``, bound with the broker)."""
        return [n.port + VIP_CHANNEL_PORT_OFFSET for n in self.nodes if not n.is_namesrv and n.port]

    def all_ports(self) -> list[int]:
        """Every port the layout binds: remoting, metrics, gRPC, then VIP channels."""
        return self.ports() + self.metrics_ports() + self.grpc_ports() + self.vip_ports()

    def shifted(self, port_base: int) -> Layout:
        """The layout with every port (metrics and gRPC too) moved by one amount, so
        that the lowest remoting port becomes ``port_base``.

        Raises:
            LayoutError: A moved port would fall outside 1..65535.
        """
        delta = port_base - min(self.ports())

        def move(port: int) -> int:
            return port + delta if port else 0

        moved = [move(p) for p in self.all_ports()]
        if min(moved) < 1 or max(moved) > MAX_PORT:
            raise LayoutError(
                f"layout {self.name}: port base {port_base} moves its ports "
                f"{min(self.all_ports())}..{max(self.all_ports())} to {min(moved)}..{max(moved)}, "
                f"outside 1..{MAX_PORT}"
            )
        nodes = tuple(
            dataclasses.replace(
                n,
                port=move(n.port),
                ha_port=move(n.ha_port),
                metrics_port=move(n.metrics_port),
                grpc_port=move(n.grpc_port),
            )
            for n in self.nodes
        )
        return Layout(self.name, nodes)


def _shipped_root() -> Traversable:
    return resources.files("aiorocketmq.deploy").joinpath("layouts")


def shipped_layouts() -> list[str]:
    """Names of the layouts shipped in the package, sorted."""
    return sorted(d.name for d in _shipped_root().iterdir() if d.is_dir())


def layout_search_path(environ: Mapping[str, str] | None = None) -> list[Traversable]:
    """Where named layouts are looked for, in order: the directories in
    ``$AIOROCKETMQ_LAYOUTS``, ``./deploy/conf`` (a project's own layouts), then the
    layouts shipped in the package."""
    env = os.environ if environ is None else environ
    dirs: list[Traversable] = [Path(p) for p in env.get(LAYOUTS_ENV, "").split(os.pathsep) if p]
    dirs.append(Path.cwd() / "deploy" / "conf")
    dirs.append(_shipped_root())
    return dirs


def find_layout_dir(name: str, environ: Mapping[str, str] | None = None) -> Traversable:
    """The directory of layout ``name`` (a path to a directory also works): a ``Path``
    for a directory on disk, a package resource for a shipped layout.

    Raises:
        LayoutError: Not found.
    """
    direct = Path(name)
    if direct.is_dir() and any(direct.glob("*" + PROPERTIES_SUFFIX)):
        return direct
    for base in layout_search_path(environ):
        candidate = base.joinpath(name)
        if candidate.is_dir():
            return candidate
    searched = ", ".join(str(p) for p in layout_search_path(environ))
    raise LayoutError(
        f"no layout {name!r} (searched {searched}; shipped: {', '.join(shipped_layouts())})"
    )


def _int(props: Mapping[str, str], key: str, source: str, default: int | None = None) -> int:
    raw = props.get(key)
    if raw is None:
        if default is None:
            raise LayoutError(f"{source}: {key} is missing")
        return default
    try:
        return int(raw.strip())
    except ValueError:
        raise LayoutError(f"{source}: {key}={raw!r} is not an integer") from None


def _read_properties(path: Traversable) -> dict[str, str]:
    try:
        return parse_properties_bytes(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise LayoutError(f"cannot read {path}: {exc}") from None


def _broker_spec(path: Traversable) -> NodeSpec:
    props = _read_properties(path)
    port = _int(props, "listenPort", str(path), 10911)
    broker_id = _int(props, "brokerId", str(path), 0)
    role = props.get("brokerRole", "ASYNC_MASTER").strip().upper()
    if (role == "SLAVE") != (broker_id != 0):
        raise LayoutError(f"{path}: brokerRole {role} does not match brokerId {broker_id}")
    metrics_port = _int(props, "metricsPort", str(path), 0)
    grpc_port = _int(props, "grpcListenPort", str(path), 0)
    for key, value in (("metricsPort", metrics_port), ("grpcListenPort", grpc_port)):
        if value < 0:
            # -1 (a free port) would be chosen by the process, where mqcluster cannot show it.
            raise LayoutError(f"{path}: {key} {value}: give a port, or 0 for none")
    rest = {k: v for k, v in props.items() if k not in _RUN_KEYS}
    return NodeSpec(
        name=path.name.removesuffix(PROPERTIES_SUFFIX),
        role=role,
        port=port,
        ha_port=_int(props, "haListenPort", str(path), port + 1),
        broker_name=props.get("brokerName", "DEFAULT_BROKER").strip(),
        broker_id=broker_id,
        properties=rest,
        # -1 marks "not set in the file": _assign_metrics_ports gives it one.
        metrics_port=metrics_port if "metricsPort" in props else -1,
        grpc_port=grpc_port if "grpcListenPort" in props else -1,
    )


def _assign_metrics_ports(nodes: Sequence[NodeSpec], base: int) -> list[NodeSpec]:
    """Brokers then name servers, each without a port from its file taking the next
    port from ``base`` that no node set explicitly; order kept as given."""
    taken = {n.metrics_port for n in nodes if n.metrics_port > 0}
    free = (p for p in range(base, MAX_PORT + 1) if p not in taken)
    assigned: dict[str, int] = {}
    for node in sorted(nodes, key=lambda n: n.is_namesrv):  # stable: brokers first
        if node.metrics_port < 0:
            assigned[node.name] = next(free, 0)
    return [
        dataclasses.replace(n, metrics_port=assigned[n.name]) if n.name in assigned else n
        for n in nodes
    ]


def _assign_grpc_ports(nodes: Sequence[NodeSpec], base: int) -> list[NodeSpec]:
    """Each broker without a gRPC port from its file takes the next port from ``base``
    that no node set explicitly, in the order given."""
    taken = {n.grpc_port for n in nodes if n.grpc_port > 0}
    free = (p for p in range(base, MAX_PORT + 1) if p not in taken)
    return [
        dataclasses.replace(n, grpc_port=next(free, 0)) if n.grpc_port < 0 else n for n in nodes
    ]


def _namesrv_specs(ports: Sequence[int]) -> list[NodeSpec]:
    # metrics_port -1: assigned by _assign_metrics_ports.
    return [
        NodeSpec(f"namesrv-{i}", NAMESRV, port, metrics_port=-1) for i, port in enumerate(ports, 1)
    ]


def _check(layout: Layout) -> Layout:
    names = [n.name for n in layout.nodes]
    if len(set(names)) != len(names):
        raise LayoutError(f"layout {layout.name}: duplicate node names {names}")
    ids = [(n.broker_name, n.broker_id) for n in layout.brokers]
    if len(set(ids)) != len(ids):
        raise LayoutError(f"layout {layout.name}: two brokers share a brokerName and brokerId")
    ports = layout.all_ports()
    if len(set(ports)) != len(ports):
        raise LayoutError(f"layout {layout.name}: two listeners share a port {sorted(ports)}")
    if not layout.brokers or not layout.namesrvs:
        raise LayoutError(f"layout {layout.name}: needs a name server and a broker")
    return layout


def load_layout(name: str, environ: Mapping[str, str] | None = None) -> Layout:
    """Parse layout ``name`` (see the module docstring).

    Raises:
        LayoutError: Missing, unreadable or inconsistent.
    """
    directory = find_layout_dir(name, environ)
    manifest_path = directory.joinpath(MANIFEST)
    manifest = _read_properties(manifest_path) if manifest_path.is_file() else {}
    raw_ports = manifest.get("namesrvPorts", str(DEFAULT_NAMESRV_PORT))
    try:
        ns_ports = [int(p) for p in raw_ports.split(";") if p.strip()]
    except ValueError:
        raise LayoutError(f"{manifest_path}: bad namesrvPorts {raw_ports!r}") from None
    metrics_base = _int(manifest, "metricsPortBase", str(manifest_path), DEFAULT_METRICS_PORT_BASE)
    grpc_base = _int(manifest, "grpcPortBase", str(manifest_path), DEFAULT_GRPC_PORT_BASE)
    brokers = [
        _broker_spec(p)
        for p in directory.iterdir()
        if p.name.endswith(PROPERTIES_SUFFIX) and p.name != MANIFEST and p.is_file()
    ]
    brokers.sort(key=lambda n: (n.broker_name, n.broker_id))
    nodes = _assign_metrics_ports(_namesrv_specs(ns_ports) + brokers, metrics_base)
    nodes = _assign_grpc_ports(nodes, grpc_base)
    return _check(Layout(directory.name, tuple(nodes)))


def standard_layout(
    brokers: Sequence[str] = ("broker-a",),
    *,
    slaves: bool = False,
    role: str = "ASYNC_MASTER",
    namesrvs: int = 1,
    flush: str = "ASYNC_FLUSH",
    settings: Mapping[str, object] | None = None,
) -> Layout:
    """A layout built in memory: ``brokers`` masters with ``role``, each with a slave
    ``<name>-s`` when ``slaves``; ports like RocketMQ's examples (9876.., 10911..),
    metrics ports from 5557 and gRPC ports from 8081 as for a layout directory."""
    extra = {k: _text(v) for k, v in (settings or {}).items()}
    nodes = _namesrv_specs([DEFAULT_NAMESRV_PORT + i for i in range(namesrvs)])
    for i, broker in enumerate(brokers):
        base = 10911 + 10 * i
        common = {"brokerClusterName": "DefaultCluster", "flushDiskType": flush, **extra}
        nodes.append(NodeSpec(broker, role, base, base + 1, broker, 0, common, -1, -1))
        if slaves:
            props = {**common, "slaveReadEnable": "true"}
            slave = NodeSpec(f"{broker}-s", "SLAVE", base + 4, base + 5, broker, 1, props, -1, -1)
            nodes.append(slave)
    nodes = _assign_metrics_ports(nodes, DEFAULT_METRICS_PORT_BASE)
    nodes = _assign_grpc_ports(nodes, DEFAULT_GRPC_PORT_BASE)
    return _check(Layout("inline", tuple(nodes)))


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def node_properties(
    node: NodeSpec,
    namesrv_addr: str,
    store_dir: Path,
    overrides: Mapping[str, object] | None = None,
) -> str:
    """The ``.properties`` text of one local run of broker ``node``: its layout
    settings, loopback ``brokerIP1``, its ports (metrics and gRPC too), its store, the
    name servers, then ``overrides``."""
    values: dict[str, str] = {
        "brokerName": node.broker_name,
        "brokerId": str(node.broker_id),
        "brokerRole": node.role,
        **node.properties,
        "listenPort": str(node.port),
        "haListenPort": str(node.ha_port),
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(store_dir),
        "namesrvAddr": namesrv_addr,
        "metricsPort": str(node.metrics_port),
        "grpcListenPort": str(node.grpc_port),
    }
    values.update({k: _text(v) for k, v in (overrides or {}).items()})
    return format_properties_file(values)
