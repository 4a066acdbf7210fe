"""Layouts: the shipped layouts (package data) parse as documented, ports shift by
a base, in-memory layouts, inconsistent files are clear errors, and a node's local
run settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.common.properties_file import parse_properties
from aiorocketmq.deploy.layout import (
    Layout,
    LayoutError,
    find_layout_dir,
    load_layout,
    node_properties,
    shipped_layouts,
    standard_layout,
)

REPO = Path(__file__).resolve().parents[3]
SHIPPED = sorted(
    p.name for p in (REPO / "aiorocketmq" / "deploy" / "layouts").iterdir() if p.is_dir()
)


def _summary(layout: Layout) -> list[tuple[str, str, int, int, str, int]]:
    return [(n.name, n.role, n.port, n.ha_port, n.broker_name, n.broker_id) for n in layout.nodes]


def test_the_three_required_layouts_ship() -> None:
    assert {"1m", "2m-2s-sync", "2m-2s-async"} <= set(SHIPPED)


def test_2m_2s_sync_nodes_roles_and_ports() -> None:
    layout = load_layout("2m-2s-sync")
    assert _summary(layout) == [
        ("namesrv-1", "NAMESRV", 9876, 0, "", -1),
        ("namesrv-2", "NAMESRV", 9877, 0, "", -1),
        ("broker-a", "SYNC_MASTER", 10911, 10912, "broker-a", 0),
        ("broker-a-s", "SLAVE", 10915, 10916, "broker-a", 1),
        ("broker-b", "SYNC_MASTER", 10921, 10922, "broker-b", 0),
        ("broker-b-s", "SLAVE", 10925, 10926, "broker-b", 1),
    ]
    assert layout.master_of(layout.node("broker-b-s")) == layout.node("broker-b")
    assert layout.node("broker-a-s").properties["slaveReadEnable"] == "true"


def test_2m_2s_async_differs_only_in_the_master_role() -> None:
    sync, asyn = load_layout("2m-2s-sync"), load_layout("2m-2s-async")
    roles = [n.role for n in asyn.brokers]
    assert roles == ["ASYNC_MASTER", "SLAVE", "ASYNC_MASTER", "SLAVE"]
    assert [(n.name, n.port, n.ha_port) for n in sync.nodes] == [
        (n.name, n.port, n.ha_port) for n in asyn.nodes
    ]


def test_1m_is_one_name_server_and_one_master() -> None:
    assert _summary(load_layout("1m")) == [
        ("namesrv-1", "NAMESRV", 9876, 0, "", -1),
        ("broker-a", "ASYNC_MASTER", 10911, 10912, "broker-a", 0),
    ]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_broker_file_uses_rocketmq_keys(name: str) -> None:
    known = {
        "brokerClusterName", "brokerName", "brokerId", "brokerRole", "flushDiskType",
        "listenPort", "haListenPort", "deleteWhen", "fileReservedTime", "slaveReadEnable",
        "mappedFileSizeCommitLog", "maxHashSlotNum", "maxIndexNum", "grpcListenPort",
    }  # fmt: skip
    files = list((REPO / "aiorocketmq" / "deploy" / "layouts" / name).glob("broker-*.properties"))
    assert files
    for path in files:
        keys = set(parse_properties(path.read_text("utf-8")))
        assert keys <= known, f"{path}: {keys - known}"
        assert {"brokerName", "brokerId", "brokerRole", "listenPort", "haListenPort"} <= keys
        assert "grpcListenPort" in keys  # docker-compose runs these files as they are


def test_shipped_layouts_give_each_broker_its_own_grpc_port() -> None:
    # RocketMQ 5's proxy port 8081 for the first broker, then one each in layout order.
    for name in ("2m-2s-sync", "2m-2s-async"):
        assert {n.name: n.grpc_port for n in load_layout(name).brokers} == {
            "broker-a": 8081, "broker-a-s": 8082, "broker-b": 8083, "broker-b-s": 8084,
        }  # fmt: skip
    assert load_layout("1m").grpc_ports() == [8081]
    inline = standard_layout(["broker-a", "broker-b"], slaves=True)
    assert inline.grpc_ports() == [8081, 8082, 8083, 8084]


def test_grpc_ports_from_files_and_manifest_shift_and_errors(tmp_path: Path) -> None:
    _write(tmp_path, "layout.properties", "grpcPortBase=9000\n")
    _write(tmp_path, "a.properties", "brokerName=a\nlistenPort=12000\ngrpcListenPort=9000\n")
    _write(tmp_path, "b.properties", "brokerName=b\nlistenPort=12010\n")
    _write(tmp_path, "c.properties", "brokerName=c\nlistenPort=12020\ngrpcListenPort=0\n")
    layout = load_layout(str(tmp_path))
    # a's own 9000 is skipped by b; c is off; name servers have none.
    assert {n.name: n.grpc_port for n in layout.nodes} == {
        "namesrv-1": 0, "a": 9000, "b": 9001, "c": 0,
    }  # fmt: skip
    assert "grpcListenPort" not in layout.node("a").properties  # the run sets it
    moved = layout.shifted(19876)  # every port by 10000 (the name server 9876 is lowest)
    assert [n.grpc_port for n in moved.nodes] == [0, 19000, 19001, 0]
    props = {n.name: parse_properties(node_properties(n, "x", tmp_path)) for n in moved.brokers}
    assert [p["grpcListenPort"] for p in props.values()] == ["19000", "19001", "0"]
    _write(tmp_path / "free", "a.properties", "brokerName=a\ngrpcListenPort=-1\n")
    with pytest.raises(LayoutError, match=r"a\.properties: grpcListenPort -1: give a port"):
        load_layout(str(tmp_path / "free"))
    _write(tmp_path / "clash", "a.properties", "brokerName=a\ngrpcListenPort=5557\n")
    with pytest.raises(LayoutError, match="two listeners share a port"):
        load_layout(str(tmp_path / "clash"))


def test_port_base_moves_every_port_by_the_same_amount() -> None:
    layout = load_layout("2m-2s-sync").shifted(20000)
    assert [(n.port, n.ha_port) for n in layout.nodes] == [
        (20000, 0), (20001, 0), (21035, 21036), (21039, 21040), (21045, 21046), (21049, 21050),
    ]  # fmt: skip
    assert min(layout.ports()) == 20000


def test_standard_layout_builds_masters_and_slaves() -> None:
    layout = standard_layout(
        ["broker-a", "broker-b"], slaves=True, role="SYNC_MASTER", namesrvs=2,
        settings={"transientStorePoolEnable": False},
    )  # fmt: skip
    assert [n.name for n in layout.nodes] == [
        "namesrv-1", "namesrv-2", "broker-a", "broker-a-s", "broker-b", "broker-b-s",
    ]  # fmt: skip
    assert layout.node("broker-b").port == 10921
    assert layout.node("broker-a-s").properties["transientStorePoolEnable"] == "false"


def test_node_properties_sets_loopback_ports_store_and_name_servers(tmp_path: Path) -> None:
    node = load_layout("2m-2s-sync").shifted(30000).node("broker-a-s")
    text = node_properties(node, "127.0.0.1:30000;127.0.0.1:30001", tmp_path / "s", {"x": True})
    props = parse_properties(text)
    assert props["brokerIP1"] == "127.0.0.1"
    assert props["listenPort"] == str(node.port)
    assert props["haListenPort"] == str(node.ha_port)
    assert props["storePathRootDir"] == str(tmp_path / "s")
    assert props["namesrvAddr"] == "127.0.0.1:30000;127.0.0.1:30001"
    assert (props["brokerRole"], props["brokerId"], props["x"]) == ("SLAVE", "1", "true")


def _write(directory: Path, name: str, text: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(text, "utf-8")


def test_unknown_layout_names_the_places_searched() -> None:
    with pytest.raises(LayoutError, match=r"no layout 'nope'.*deploy/conf"):
        load_layout("nope")


def test_unknown_node_lists_the_nodes() -> None:
    with pytest.raises(LayoutError, match=r"no node 'broker-z'.*broker-a"):
        load_layout("1m").node("broker-z")


def test_layouts_env_is_searched_first(tmp_path: Path) -> None:
    _write(tmp_path / "mine", "solo.properties", "brokerName=solo\nlistenPort=12000\n")
    env = {"AIOROCKETMQ_LAYOUTS": str(tmp_path)}
    assert find_layout_dir("mine", env) == tmp_path / "mine"
    layout = load_layout("mine", env)
    assert [(n.name, n.port, n.ha_port) for n in layout.nodes] == [
        ("namesrv-1", 9876, 0), ("solo", 12000, 12001),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("files", "error"),
    [
        ({"b.properties": "brokerId=1\nbrokerRole=SYNC_MASTER\n"}, "does not match brokerId"),
        ({"b.properties": "listenPort=abc\n"}, "listenPort='abc' is not an integer"),
        (
            {"a.properties": "listenPort=12000\n", "b.properties": "listenPort=12001\n"},
            "share a brokerName and brokerId",
        ),
        (
            {"a.properties": "brokerName=a\nlistenPort=12000\n",
             "b.properties": "brokerName=b\nlistenPort=12001\n"},
            "share a port",
        ),
        ({"layout.properties": "namesrvPorts=x\n", "b.properties": "x=1\n"}, "bad namesrvPorts"),
        ({"layout.properties": "namesrvPorts=9876\n"}, "needs a name server and a broker"),
    ],
)  # fmt: skip
def test_inconsistent_layouts_are_clear_errors(
    tmp_path: Path, files: dict[str, str], error: str
) -> None:
    for name, text in files.items():
        _write(tmp_path / "bad", name, text)
    with pytest.raises(LayoutError, match=error):
        load_layout(str(tmp_path / "bad"))


# -- package data and metrics ports -----------------------------------------------------


def test_shipped_layouts_are_package_resources(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)  # no ./deploy/conf: only the package can answer
    assert shipped_layouts() == SHIPPED
    found = find_layout_dir("1m", {})
    assert str(found).endswith(str(Path("aiorocketmq", "deploy", "layouts", "1m")))
    with pytest.raises(LayoutError, match=r"shipped: 1m, 2m-2s-async, 2m-2s-sync"):
        load_layout("nope", {})


def test_project_layouts_in_cwd_win_over_shipped(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _write(tmp_path / "deploy" / "conf" / "1m", "mine.properties", "brokerName=mine\n")
    monkeypatch.chdir(tmp_path)
    assert [n.name for n in load_layout("1m", {}).brokers] == ["mine"]


def test_every_node_has_its_own_metrics_port() -> None:
    layout = load_layout("2m-2s-sync")
    assert {n.name: n.metrics_port for n in layout.nodes} == {
        "broker-a": 5557, "broker-a-s": 5558, "broker-b": 5559, "broker-b-s": 5560,
        "namesrv-1": 5561, "namesrv-2": 5562,
    }  # fmt: skip
    # 1m keeps the daemons' own defaults: broker 5557, name server 5558.
    assert [(n.name, n.metrics_port) for n in load_layout("1m").nodes] == [
        ("namesrv-1", 5558), ("broker-a", 5557),
    ]  # fmt: skip
    inline = standard_layout(["broker-a", "broker-b"], slaves=True)
    assert sorted(inline.metrics_ports()) == list(range(5557, 5562))


def test_metrics_ports_from_files_and_manifest(tmp_path: Path) -> None:
    _write(tmp_path, "layout.properties", "namesrvPorts=9876;9877\nmetricsPortBase=7000\n")
    _write(tmp_path, "a.properties", "brokerName=a\nlistenPort=12000\nmetricsPort=7001\n")
    _write(tmp_path, "b.properties", "brokerName=b\nlistenPort=12010\n")
    _write(tmp_path, "c.properties", "brokerName=c\nlistenPort=12020\nmetricsPort=0\n")
    layout = load_layout(str(tmp_path))
    # a's own 7001 is skipped by the others; c is off and binds nothing.
    assert {n.name: n.metrics_port for n in layout.nodes} == {
        "a": 7001, "b": 7000, "c": 0, "namesrv-1": 7002, "namesrv-2": 7003,
    }  # fmt: skip
    assert "metricsPort" not in layout.node("a").properties  # the run sets it
    assert parse_properties(node_properties(layout.node("c"), "x", tmp_path))["metricsPort"] == "0"


def test_bad_metrics_ports_are_clear_errors(tmp_path: Path) -> None:
    _write(tmp_path / "free", "a.properties", "brokerName=a\nmetricsPort=-1\n")
    with pytest.raises(LayoutError, match=r"a\.properties: metricsPort -1: give a port, or 0"):
        load_layout(str(tmp_path / "free"))
    _write(tmp_path / "clash", "a.properties", "brokerName=a\nmetricsPort=10911\n")
    with pytest.raises(LayoutError, match="two listeners share a port"):
        load_layout(str(tmp_path / "clash"))


def test_shift_moves_metrics_ports_and_refuses_out_of_range() -> None:
    layout = load_layout("1m").shifted(20000)
    assert [(n.port, n.metrics_port) for n in layout.nodes] == [(20000, 15682), (21035, 15681)]
    with pytest.raises(LayoutError, match=r"port base 2000 .* outside 1\.\.65535"):
        load_layout("1m").shifted(2000)
