"""``mqcluster`` without processes: argument parsing, the status table, the run
directory ``create`` writes, free port bases, and exit codes for bad input."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from aiorocketmq.cli.cluster import build_parser, format_status, main
from aiorocketmq.common.properties_file import parse_properties
from aiorocketmq.deploy.cluster import Cluster, NodeStatus
from aiorocketmq.deploy.layout import load_layout
from aiorocketmq.deploy.process import free_port_base, pid_alive


def test_parser_takes_dir_before_or_after_the_subcommand() -> None:
    parser = build_parser()
    args = parser.parse_args(["up", "--layout", "1m", "--port-base", "0", "--set", "a=b",
                              "--foreground", "--dir", "x"])  # fmt: skip
    assert (args.command, args.layout, args.port_base, args.set, args.foreground, args.dir) == (
        "up", "1m", 0, ["a=b"], True, Path("x"),
    )  # fmt: skip
    args = parser.parse_args(["--dir", "y", "kill", "broker-a"])
    assert (args.command, args.node, args.dir) == ("kill", "broker-a", Path("y"))
    assert parser.parse_args(["status"]).dir == Path("./data")


def test_status_table_has_mqadmin_style_headers_and_dashes_for_unknowns() -> None:
    rows = [
        NodeStatus("namesrv-1", "NAMESRV", "127.0.0.1:9876", 11, True, metrics_port=5558),
        NodeStatus("broker-a", "SYNC_MASTER", "127.0.0.1:10911", None, False),
        NodeStatus("broker-a-s", "SLAVE", "127.0.0.1:10915", 13, True, 4096, 1024, 5559, 8082),
    ]
    lines = format_status(rows).splitlines()
    assert lines[0].split() == ["#Node", "#Role", "#Address", "#Metrics", "#gRPC", "#PID",
                                "#State", "#MaxOffset", "#Lag"]  # fmt: skip
    assert lines[1].split() == ["namesrv-1", "NAMESRV", "127.0.0.1:9876", "5558", "-", "11",
                                "running", "-", "-"]  # fmt: skip
    assert lines[2].split() == ["broker-a", "SYNC_MASTER", "127.0.0.1:10911", "-", "-", "-",
                                "down", "-", "-"]  # fmt: skip
    assert lines[3].split()[3:] == ["5559", "8082", "13", "running", "4096", "1024"]


def test_create_writes_state_conf_and_shifted_ports(tmp_path: Path) -> None:
    cluster = Cluster.create(load_layout("2m-2s-sync"), tmp_path, 21000, {"x": 1})
    assert cluster.namesrv_addr == "127.0.0.1:21000;127.0.0.1:21001"
    conf = parse_properties((tmp_path / "conf" / "broker-b-s.properties").read_text("utf-8"))
    assert conf["listenPort"] == "22049" and conf["haListenPort"] == "22050"
    assert conf["namesrvAddr"] == cluster.namesrv_addr
    assert conf["storePathRootDir"] == str(tmp_path.resolve() / "store" / "broker-b-s")
    assert conf["x"] == "1"
    ns = parse_properties((tmp_path / "conf" / "namesrv-2.properties").read_text("utf-8"))
    assert ns["kvConfigPath"] == str(tmp_path.resolve() / "store" / "namesrv-2" / "kvConfig.json")
    again = Cluster.open(tmp_path)
    assert again.layout == cluster.layout and again.overrides == {"x": "1"}
    rows = again.status()
    assert [r.running for r in rows] == [False] * 6
    # Every node its own metrics port, moved with the rest (5557.. + 21000 - 9876).
    assert {r.name: r.metrics_port for r in rows} == {
        "namesrv-1": 16685, "namesrv-2": 16686, "broker-a": 16681, "broker-a-s": 16682,
        "broker-b": 16683, "broker-b-s": 16684,
    }  # fmt: skip
    assert conf["metricsPort"] == "16684" and ns["metricsPort"] == "16686"
    # And every broker its own gRPC port (8081.. + 21000 - 9876); name servers none.
    assert {r.name: r.grpc_port for r in rows} == {
        "namesrv-1": 0, "namesrv-2": 0, "broker-a": 19205, "broker-a-s": 19206,
        "broker-b": 19207, "broker-b-s": 19208,
    }  # fmt: skip
    assert conf["grpcListenPort"] == "19208" and "grpcListenPort" not in ns


def test_free_port_base_finds_ports_that_bind() -> None:
    offsets = [0, 1, 1035, 1036]
    base = free_port_base(offsets)
    for off in offsets:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", base + off))


def test_pid_alive_checks_the_command_line() -> None:
    assert pid_alive(os.getpid())
    assert pid_alive(os.getpid(), "python")
    assert not pid_alive(os.getpid(), "no-such-marker-in-my-command-line")


def test_unknown_layout_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dir", str(tmp_path), "up", "--layout", "nope"]) == 2
    assert "no layout 'nope'" in capsys.readouterr().err


def test_bad_set_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--dir", str(tmp_path), "up", "--layout", "1m", "--set", "novalue"]) == 2
    assert "expected KEY=VALUE" in capsys.readouterr().err


def test_commands_without_a_cluster_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--dir", str(tmp_path), "status"]) == 1
    assert f"no cluster in {tmp_path}" in capsys.readouterr().err


def test_unknown_node_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Cluster.create(load_layout("1m"), tmp_path, 21000)
    assert main(["--dir", str(tmp_path), "kill", "broker-z"]) == 2
    assert "no node 'broker-z'" in capsys.readouterr().err


def test_status_json_lists_every_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    Cluster.create(load_layout("1m"), tmp_path, 21000)
    assert main(["--dir", str(tmp_path), "status", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["name"], r["role"], r["address"], r["running"]) for r in rows] == [
        ("namesrv-1", "NAMESRV", "127.0.0.1:21000", False),
        ("broker-a", "ASYNC_MASTER", "127.0.0.1:22035", False),
    ]
