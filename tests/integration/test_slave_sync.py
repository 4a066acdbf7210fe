"""SlaveSynchronize between a running master and slave (metadata only, no HA).

The slave learns its master from the name server's registration reply and copies
topics, subscription groups, consumer offsets and delay offsets; offsets committed
to the slave while the master lagged behind are kept (the larger offset wins).
"""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from tests.support.cluster import in_process_broker, in_process_namesrv
from tests.support.wait import wait_until


async def test_slave_copies_master_metadata_and_keeps_newer_offsets(tmp_path: Path) -> None:
    async with (
        in_process_namesrv(tmp_path) as namesrv,
        in_process_broker(tmp_path, "broker-a", namesrv.address) as master,
    ):
        master.ctx.topics.update_topic_config(TopicConfig("Replicated", 4, 4))
        master.ctx.groups.update_subscription_group_config(
            SubscriptionGroupConfig("CID_replicated", retry_max_times=3)
        )
        master.ctx.offsets.commit_offset("test", "CID_replicated", "Replicated", 0, 10)
        master.ctx.offsets.commit_offset("test", "CID_replicated", "Replicated", 1, 20)
        async with in_process_broker(
            tmp_path / "slave",
            "broker-a",
            namesrv.address,
            brokerId=1,
            brokerRole="SLAVE",
        ) as slave:
            assert slave.slave_sync.master_addr == master.address
            await wait_until(lambda: slave.slave_sync.syncs >= 1, timeout=10, what="first sync")
            assert slave.ctx.topics.select_topic_config("Replicated") == TopicConfig(
                "Replicated", 4, 4
            )
            group = slave.ctx.groups.find_subscription_group_config("CID_replicated")
            assert group is not None and group.retry_max_times == 3
            assert slave.ctx.offsets.query_offsets("CID_replicated", "Replicated") == {0: 10, 1: 20}
            # A consumer committed further on the slave (master down); the master's
            # older offset must not roll it back, its newer one must win.
            slave.ctx.offsets.commit_offset("test", "CID_replicated", "Replicated", 0, 15)
            master.ctx.offsets.commit_offset("test", "CID_replicated", "Replicated", 1, 25)
            assert await slave.slave_sync.sync_all()
            assert slave.ctx.offsets.query_offsets("CID_replicated", "Replicated") == {0: 15, 1: 25}
        # The slave persisted what it copied.
        text = (tmp_path / "slave" / "broker-a-store" / "config" / "topics.json").read_text()
        assert "Replicated" in text
