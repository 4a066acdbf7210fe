"""TopicConfigManager: system topics, auto-create rules, versions, topics.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.topic_config import DataVersion, TopicConfig
from aiorocketmq.runtime import BlockingExecutor

pytestmark = pytest.mark.timeout(30)


def _mgr(tmp_path: Path, executor: BlockingExecutor, **cfg: object) -> TopicConfigManager:
    config = BrokerConfig(broker_name="broker-a", broker_cluster_name="DefaultCluster", **cfg)
    return TopicConfigManager(tmp_path / "topics.json", executor, config, ManualClock())


async def test_system_topics_as_java_creates_them(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    mgr = _mgr(tmp_path, executor)
    t = mgr.topic_config_table()
    assert t["TBW102"] == TopicConfig("TBW102", 8, 8, 7)
    assert t["SELF_TEST_TOPIC"] == TopicConfig("SELF_TEST_TOPIC", 1, 1, 6)
    assert t["BenchmarkTest"].write_queue_nums == 1024
    assert t["DefaultCluster"] == TopicConfig("DefaultCluster", 16, 16, 7)
    assert t["broker-a"] == TopicConfig("broker-a", 1, 1, 7)
    assert t["OFFSET_MOVED_EVENT"] == TopicConfig("OFFSET_MOVED_EVENT", 1, 1, 6)
    assert t["SCHEDULE_TOPIC_XXXX"] == TopicConfig("SCHEDULE_TOPIC_XXXX", 18, 18, 6)
    assert t["DefaultCluster_REPLY_TOPIC"] == TopicConfig("DefaultCluster_REPLY_TOPIC", 1, 1, 6)
    assert "RMQ_SYS_TRACE_TOPIC" not in t
    assert mgr.is_system_topic("broker-a") and not mgr.is_system_topic("TopicTest")
    off = _mgr(
        tmp_path,
        executor,
        auto_create_topic_enable=False,
        cluster_topic_enable=False,
        broker_topic_enable=False,
        trace_topic_enable=True,
    ).topic_config_table()
    assert "TBW102" not in off
    assert off["DefaultCluster"].perm == 1 and off["broker-a"].perm == 1
    assert off["RMQ_SYS_TRACE_TOPIC"] == TopicConfig("RMQ_SYS_TRACE_TOPIC", 1, 1, 6)


async def test_auto_create_from_tbw102(tmp_path: Path, executor: BlockingExecutor) -> None:
    mgr = _mgr(tmp_path, executor)
    versions: list[DataVersion] = []
    mgr.add_change_listener(versions.append)
    before = mgr.data_version
    tc = mgr.create_topic_in_send_message_method("TopicTest", "TBW102", "h:1", 4, 0)
    assert tc == TopicConfig("TopicTest", 4, 4, 6)
    assert mgr.create_topic_in_send_message_method("TopicTest", "TBW102", "h:1", 16, 0) is tc
    big = mgr.create_topic_in_send_message_method("Big", "TBW102", "h:1", 100, 3)
    assert big == TopicConfig("Big", 8, 8, 6, topic_sys_flag=3)  # min(8, 100)
    assert len(versions) == 2 and versions[-1] == mgr.data_version
    assert mgr.data_version.counter == before.counter + 2
    await mgr.flush()
    assert "TopicTest" in (tmp_path / "topics.json").read_text()


async def test_auto_create_refused(tmp_path: Path, executor: BlockingExecutor) -> None:
    mgr = _mgr(tmp_path, executor)
    assert mgr.create_topic_in_send_message_method("T", "NoSuchDefault", "h", 4, 0) is None
    assert mgr.create_topic_in_send_message_method("T", "SELF_TEST_TOPIC", "h", 4, 0) is None
    off = _mgr(tmp_path, executor, auto_create_topic_enable=False)
    off.update_topic_config(TopicConfig("TBW102", 8, 8, 7))  # e.g. from an old topics.json
    assert off.create_topic_in_send_message_method("T", "TBW102", "h", 4, 0) is None
    assert off.select_topic_config("TBW102") == TopicConfig("TBW102", 8, 8, 6)
    await off.flush()


async def test_send_back_update_delete_and_order(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    mgr = _mgr(tmp_path, executor)
    retry = mgr.create_topic_in_send_message_back_method("%RETRY%g", 1, 6, 0)
    assert retry == TopicConfig("%RETRY%g", 1, 1, 6)
    assert mgr.create_topic_in_send_message_back_method("%RETRY%g", 5, 2, 0) is retry
    mgr.update_topic_config(TopicConfig("T", 4, 4))
    mgr.update_topic_sys_flag("T", 1)
    assert mgr.select_topic_config("T") == TopicConfig("T", 4, 4, topic_sys_flag=1)
    assert mgr.update_order_topic_config(["T"]) and mgr.is_order_topic("T")
    assert not mgr.update_order_topic_config(["T", "Unknown"])
    assert mgr.update_order_topic_config([]) and not mgr.is_order_topic("T")
    counter = mgr.data_version.counter
    assert mgr.delete_topic_config("T") and not mgr.delete_topic_config("T")
    assert mgr.data_version.counter == counter + 1
    wrapper = mgr.build_serialize_wrapper()
    assert "T" not in wrapper.topic_config_table and wrapper.data_version == mgr.data_version
    await mgr.flush()


async def test_topics_json_round_trip_over_system_topics(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    mgr = _mgr(tmp_path, executor)
    mgr.update_topic_config(TopicConfig("T", 2, 2, 6, order=True))
    mgr.update_topic_config(TopicConfig("SCHEDULE_TOPIC_XXXX", 18, 18, 4))
    await mgr.flush()
    text = (tmp_path / "topics.json").read_text()
    assert text.startswith('{\n\t"dataVersion":{\n\t\t"counter":2,')
    again = _mgr(tmp_path, executor)
    assert await again.load()
    assert again.data_version == mgr.data_version
    assert again.topic_config_table() == mgr.topic_config_table()
    assert again.select_topic_config("SCHEDULE_TOPIC_XXXX") == TopicConfig(
        "SCHEDULE_TOPIC_XXXX", 18, 18, 4
    )


async def test_persist_coalesces_and_survives_a_failure(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    config = BrokerConfig(broker_name="b")
    bad = TopicConfigManager(blocker / "topics.json", executor, config, ManualClock())
    bad.update_topic_config(TopicConfig("T"))
    with pytest.raises(OSError):
        await bad.flush()
    assert bad.persist_failures == 1
