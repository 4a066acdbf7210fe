"""SubscriptionGroupManager and SubscriptionGroupConfig: defaults, auto-create, file."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.runtime import BlockingExecutor

pytestmark = pytest.mark.timeout(30)


def _mgr(tmp_path: Path, executor: BlockingExecutor, auto: bool = True) -> SubscriptionGroupManager:
    cfg = BrokerConfig(broker_name="b", auto_create_subscription_group=auto)
    return SubscriptionGroupManager(
        tmp_path / "subscriptionGroup.json", executor, cfg, ManualClock()
    )


def test_config_defaults_and_json() -> None:
    c = SubscriptionGroupConfig("g")
    assert (c.consume_enable, c.consume_from_min_enable, c.consume_broadcast_enable) == (
        True,
        True,
        True,
    )
    assert (c.retry_queue_nums, c.retry_max_times, c.broker_id) == (1, 16, 0)
    assert c.which_broker_when_consume_slowly == 1 and c.notify_consumer_ids_changed_enable
    body = c.encode()
    assert body.startswith(b'{"brokerId":0,"consumeBroadcastEnable":true,')
    assert SubscriptionGroupConfig.decode(body) == c
    assert SubscriptionGroupConfig.decode('{"groupName":"x","retryMaxTimes":"3"}') == (
        SubscriptionGroupConfig("x", retry_max_times=3)
    )


async def test_system_groups_and_auto_create(tmp_path: Path, executor: BlockingExecutor) -> None:
    mgr = _mgr(tmp_path, executor)
    table = mgr.subscription_group_table()
    for g in ("TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONSAPI_PULL"):
        assert table[g] == SubscriptionGroupConfig(g)
    counter = mgr.data_version.counter
    created = mgr.find_subscription_group_config("g1")
    assert created == SubscriptionGroupConfig("g1")
    assert mgr.find_subscription_group_config("g1") is created
    assert mgr.data_version.counter == counter + 1
    off = _mgr(tmp_path, executor, auto=False)
    assert off.find_subscription_group_config("g1") is None
    assert off.find_subscription_group_config("CID_RMQ_SYS_TRACE") is not None
    await mgr.flush()
    await off.flush()


async def test_update_disable_delete_and_file(tmp_path: Path, executor: BlockingExecutor) -> None:
    mgr = _mgr(tmp_path, executor)
    mgr.update_subscription_group_config(SubscriptionGroupConfig("g", retry_max_times=3))
    mgr.disable_consume("g")
    assert not mgr.subscription_group_table()["g"].consume_enable
    mgr.update_subscription_group_config(SubscriptionGroupConfig("h", broker_id=1))
    assert mgr.delete_subscription_group_config("h")
    assert not mgr.delete_subscription_group_config("h")
    await mgr.flush()
    text = (tmp_path / "subscriptionGroup.json").read_text()
    assert text.startswith('{\n\t"dataVersion":{')
    assert '\n\t"subscriptionGroupTable":{' in text
    again = _mgr(tmp_path, executor, auto=False)
    assert await again.load()
    assert again.data_version == mgr.data_version
    assert again.subscription_group_table() == mgr.subscription_group_table()
    assert again.contains("g") and not again.contains("h")
