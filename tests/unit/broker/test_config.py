"""BrokerConfig and the one-file loader (BrokerStartup's split and fix-ups)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.broker.config import (
    BrokerConfig,
    ConfigError,
    load_broker_settings,
    render_settings,
)
from aiorocketmq.common.properties_file import parse_properties
from aiorocketmq.store.config import BrokerRole, FlushDiskType

FIXTURES = Path(__file__).parent / "fixtures"


def _load(name: str) -> dict[str, str]:
    return parse_properties((FIXTURES / name).read_text("utf-8"))


def test_defaults_are_rocketmq_4_9_8() -> None:
    cfg = BrokerConfig()
    assert cfg.broker_cluster_name == "DefaultCluster"
    assert cfg.broker_name  # the host name, or DEFAULT_BROKER
    assert cfg.broker_id == 0
    assert cfg.broker_permission == 6
    assert cfg.default_topic_queue_nums == 8
    assert cfg.auto_create_topic_enable and cfg.auto_create_subscription_group
    assert cfg.cluster_topic_enable and cfg.broker_topic_enable
    assert cfg.register_broker_timeout_mills == 6000
    assert cfg.register_name_server_period == 30_000
    assert not cfg.slave_read_enable and cfg.long_polling_enable
    assert cfg.short_polling_time_mills == 1000
    assert cfg.flush_consumer_offset_interval == 5000
    assert cfg.broker_ip1 is None and cfg.namesrv_addr_list == []


def test_stock_broker_conf_loads() -> None:
    s = load_broker_settings(_load("broker.conf"))
    assert s.unknown_keys == []
    assert s.broker.broker_name == "broker-a" and s.broker.broker_id == 0
    assert s.store.broker_role is BrokerRole.ASYNC_MASTER
    assert s.store.flush_disk_type is FlushDiskType.ASYNC_FLUSH
    assert s.store.file_reserved_time == 48 and s.store.delete_when == "04"
    assert s.remoting.listen_port == 10911 and s.store.ha_listen_port == 10912


@pytest.mark.parametrize(
    ("name", "broker_name", "broker_id", "role"),
    [
        ("2m-2s-sync-broker-a.properties", "broker-a", 0, BrokerRole.SYNC_MASTER),
        ("2m-2s-sync-broker-a-s.properties", "broker-a", 1, BrokerRole.SLAVE),
        ("2m-2s-sync-broker-b.properties", "broker-b", 0, BrokerRole.SYNC_MASTER),
        ("2m-2s-sync-broker-b-s.properties", "broker-b", 1, BrokerRole.SLAVE),
    ],
)
def test_stock_2m_2s_sync_files_load(
    name: str, broker_name: str, broker_id: int, role: BrokerRole
) -> None:
    s = load_broker_settings(_load(name))
    assert s.unknown_keys == []
    assert (s.broker.broker_name, s.broker.broker_id, s.store.broker_role) == (
        broker_name,
        broker_id,
        role,
    )


def test_namesrv_addr_list_and_ip_aliases() -> None:
    s = load_broker_settings(
        {"namesrvAddr": "a:9876; b:9876;", "brokerIP1": "10.0.0.1", "brokerIP2": "10.0.0.2"}
    )
    assert s.broker.namesrv_addr_list == ["a:9876", "b:9876"]
    assert (s.broker.broker_ip1, s.broker.broker_ip2) == ("10.0.0.1", "10.0.0.2")


def test_ports_listen_and_ha() -> None:
    assert load_broker_settings({"listenPort": "20911"}).store.ha_listen_port == 20912
    s = load_broker_settings({"listenPort": "20911", "haListenPort": "30000"})
    assert s.store.ha_listen_port == 30000


def test_grpc_port_defaults_to_8081_and_a_free_one_with_listen_port_0() -> None:
    # RocketMQ 5's proxy port, on by default; a broker on a free remoting port (tests,
    # launchers) gets a free gRPC port too, unless the file names one; 0 turns it off.
    assert load_broker_settings({"listenPort": "20911"}).broker.grpc_listen_port == 8081
    assert load_broker_settings({"listenPort": "0"}).broker.grpc_listen_port == -1
    for value in ("0", "9081", "-1"):
        s = load_broker_settings({"listenPort": "0", "grpcListenPort": value})
        assert s.broker.grpc_listen_port == int(value)
    with pytest.raises(ConfigError, match="grpcListenPort"):
        load_broker_settings({"grpcListenPort": "-2"})


def test_register_period_clamped() -> None:
    assert BrokerConfig(register_name_server_period=1000).register_name_server_period == 10_000
    assert BrokerConfig(register_name_server_period=90_000).register_name_server_period == 60_000


def test_unknown_key_reported_and_bad_value_names_key() -> None:
    assert load_broker_settings({"noSuchKey": "1"}).unknown_keys == ["noSuchKey"]
    with pytest.raises(ConfigError, match="defaultTopicQueueNums"):
        load_broker_settings({"defaultTopicQueueNums": "many"})


def test_role_fix_ups_and_dledger_refused() -> None:
    master = load_broker_settings({"brokerRole": "SYNC_MASTER", "brokerId": "3"})
    assert master.broker.broker_id == 0
    with pytest.raises(ConfigError, match="brokerId"):
        load_broker_settings({"brokerRole": "SLAVE", "brokerId": "0"})
    with pytest.raises(ConfigError, match="DLedger"):
        load_broker_settings({"enableDLegerCommitLog": "true"})


def test_overrides_win() -> None:
    s = load_broker_settings({"namesrvAddr": "a:1"}, {"namesrv_addr": "b:2"})
    assert s.broker.namesrv_addr_list == ["b:2"]


def test_render_every_and_important() -> None:
    s = load_broker_settings(_load("broker.conf"))
    every = parse_properties(render_settings(s))
    important = parse_properties(render_settings(s, important_only=True))
    assert every["brokerName"] == "broker-a" and every["listenPort"] == "10911"
    assert every["defaultTopicQueueNums"] == "8" and every["haListenPort"] == "10912"
    assert set(important) < set(every)
    assert "brokerClusterName" in important and "defaultTopicQueueNums" not in important


def test_netty_keys_are_ignored_not_unknown_and_client_keys_load() -> None:
    s = load_broker_settings(
        {"serverWorkerThreads": "8", "useTLS": "false", "connectTimeoutMillis": "1234"}
    )
    assert s.unknown_keys == []
    assert s.ignored_keys == ["serverWorkerThreads"]  # useTLS now means TLS (issue 12)
    assert s.client.connect_timeout_millis == 1234
    assert not s.client.use_tls
