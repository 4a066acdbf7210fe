"""``mqcluster``: run a cluster layout as local processes on 127.0.0.1.

Usage::

    mqcluster up      [--layout NAME] [--dir DIR] [--port-base N] [--set KEY=VALUE]...
                      [--foreground]
    mqcluster status  [--dir DIR] [--json]
    mqcluster kill    NODE [--dir DIR]      # SIGKILL by PID file
    mqcluster stop    NODE [--dir DIR]      # SIGTERM, wait
    mqcluster restart NODE [--dir DIR]      # stop if running, start, wait registered
    mqcluster down    [--dir DIR]           # SIGTERM everything, wait

Layouts: ``1m``, ``2m-2s-sync`` and ``2m-2s-async`` ship with the package; your own
are found in ``$AIOROCKETMQ_LAYOUTS`` and ``./deploy/conf/<NAME>/`` first (a directory
path works too). Every node serves ``/metrics`` on its own port, and every broker
RocketMQ 5's gRPC endpoint on its own (``status`` shows both). ``--port-base N``
moves every port by one amount so the layout's lowest remoting port becomes N
(``0``: a free base). ``--set`` adds a broker setting to
every broker. ``up`` returns once every broker is registered with every name server; with
``--foreground`` it stays attached and stops everything on Ctrl-C or SIGTERM.

Exit codes: 0 done, 1 a node failed to start/stop or did not converge, 2 bad
arguments or layout.

Owns: the command line and the printed table. Must not: hold launcher logic
(``aiorocketmq.deploy``).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from aiorocketmq.deploy.cluster import Cluster, ClusterError, NodeStatus
from aiorocketmq.deploy.layout import LayoutError, load_layout
from aiorocketmq.deploy.process import ProcessError

__all__ = ["build_parser", "format_status", "main"]

EXIT_FAILED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``mqcluster``."""
    parser = argparse.ArgumentParser(
        prog="mqcluster", description="Run an aiorocketmq cluster layout as local processes."
    )
    parser.add_argument("--dir", default="./data", type=Path, help="run directory (./data)")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the layout and wait until registered")
    up.add_argument("--layout", default="2m-2s-sync", help="layout name or directory")
    up.add_argument("--port-base", type=int, default=None, help="shift ports (0: a free base)")
    up.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="broker setting for every broker (repeatable)",
    )
    up.add_argument("--foreground", action="store_true", help="stay attached; Ctrl-C stops")
    up.add_argument("--timeout", type=float, default=60.0, help="registration timeout (s)")
    status = sub.add_parser("status", help="roles, addresses, PIDs, offsets, slave lag")
    status.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    for name, text in (
        ("kill", "SIGKILL one node"),
        ("stop", "SIGTERM one node"),
        ("restart", "restart one node"),
    ):
        sub.add_parser(name, help=text).add_argument("node")
    sub.add_parser("down", help="stop every node")
    for command in sub.choices.values():  # --dir also after the subcommand
        command.add_argument("--dir", default=argparse.SUPPRESS, type=Path)
    return parser


def format_status(rows: Sequence[NodeStatus]) -> str:
    """``status`` as an mqadmin-style table (``#`` headers)."""

    def cell(value: object) -> str:
        return "-" if value is None else str(value)

    lines = [
        f"{'#Node':<14}{'#Role':<14}{'#Address':<18}{'#Metrics':<10}{'#gRPC':<8}{'#PID':<9}"
        f"{'#State':<9}{'#MaxOffset':<14}#Lag"
    ]
    for r in rows:
        state = "running" if r.running else "down"
        lines.append(
            f"{r.name:<14}{r.role:<14}{r.address:<18}{cell(r.metrics_port or None):<10}"
            f"{cell(r.grpc_port or None):<8}{cell(r.pid):<9}{state:<9}{cell(r.max_offset):<14}"
            f"{cell(r.lag)}"
        )
    return "\n".join(lines)


def _overrides(pairs: Sequence[str]) -> dict[str, object]:
    values: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise LayoutError(f"--set {pair!r}: expected KEY=VALUE")
        values[key.strip()] = value.strip()
    return values


def _wait_for_signal() -> None:
    stop = threading.Event()

    def handler(signum: int, frame: object) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)
    while not stop.wait(1.0):
        pass


def _up(args: argparse.Namespace) -> int:
    if (args.dir / "cluster.json").exists():
        old = Cluster.open(args.dir)
        live = [n.name for n in old.layout.nodes if old.running(n.name)]
        if live:
            print(
                f"mqcluster: already running in {args.dir}: {', '.join(live)} "
                "(mqcluster down first)",
                file=sys.stderr,
            )
            return EXIT_FAILED
    layout = load_layout(args.layout)
    cluster = Cluster.create(layout, args.dir, args.port_base, _overrides(args.set))
    cluster.die_with_parent = args.foreground  # attached: nodes go when we go
    try:
        cluster.up(args.timeout)
    except (ProcessError, ClusterError) as exc:
        print(f"mqcluster: {exc}", file=sys.stderr)
        cluster.down()
        return EXIT_FAILED
    print(format_status(cluster.status()))
    print(
        f"mqcluster: {layout.name} up in {cluster.directory}; NAMESRV_ADDR={cluster.namesrv_addr}",
        flush=True,
    )
    if args.foreground:
        print("mqcluster: Ctrl-C stops the cluster", flush=True)
        _wait_for_signal()
        cluster.down()
        print("mqcluster: stopped", flush=True)
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.command == "up":
        return _up(args)
    cluster = Cluster.open(args.dir)
    if args.command == "status":
        rows = cluster.status()
        if args.json:
            print("\n".join(json.dumps(r.as_dict()) for r in rows))
        else:
            print(format_status(rows))
    elif args.command == "kill":
        cluster.kill(args.node)
    elif args.command == "stop":
        cluster.stop(args.node)
    elif args.command == "restart":
        cluster.restart(args.node)
    elif args.command == "down":
        cluster.down()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mqcluster``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except LayoutError as exc:
        print(f"mqcluster: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (ProcessError, ClusterError) as exc:
        print(f"mqcluster: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
