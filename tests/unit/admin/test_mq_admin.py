"""MQAdmin and mqadmin's commands against a real in-process name server and broker.

Everything goes over 127.0.0.1 sockets to the real ``NamesrvController`` and
``BrokerController``; a command's output is captured through its ``write``.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

import pytest

from aiorocketmq.admin import commands
from aiorocketmq.admin.mq_admin import NAMESPACE_ORDER_TOPIC_CONFIG, MQAdmin, MQAdminError
from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.client.errors import MQBrokerError, MQConnectError, NoNameServerError, NoRouteError
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.codes import ResponseCode
from tests.support.cluster import get_route, wait_route

pytestmark = pytest.mark.timeout(60)


async def run(admin: MQAdmin, name: str, **options: Any) -> str:
    """Run one command with ``options`` (unset ones None) and return what it printed."""
    out: list[str] = []
    await commands.COMMANDS[name](admin, Options(**options), out.append)
    return "".join(out)


class Options(Namespace):
    """Parsed options: an option not given reads as None, as argparse leaves it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None


async def test_create_topic_reaches_broker_and_name_server(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    await admin.create_topic(broker.address, TopicConfig("AdminT1", 4, 2, 6))
    table = await admin.broker.get_all_topic_config(broker.address)
    assert table.topic_config_table["AdminT1"].write_queue_nums == 2
    route = await wait_route(namesrv.address, "AdminT1", timeout=10)
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [
        ("broker-a", 4, 2)
    ]
    same = await admin.examine_topic_route("AdminT1")
    assert same.broker_datas[0].broker_addrs == {0: broker.address}


async def test_update_topic_command_by_cluster_prints_java_lines(
    admin: MQAdmin, broker: BrokerController
) -> None:
    text = await run(admin, "updateTopic", clusterName="DefaultCluster", topic=" AdminT2 ", perm=4)
    assert text == (
        f"create topic to {broker.address} success.\n"
        "TopicConfig [topicName=AdminT2, readQueueNums=8, writeQueueNums=8, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false]\n"
    )
    table = await admin.broker.get_all_topic_config(broker.address)
    assert table.topic_config_table["AdminT2"].perm == 4


async def test_ordered_topic_on_one_broker_merges_the_order_conf(
    admin: MQAdmin, broker: BrokerController
) -> None:
    await admin.namesrv.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, "OrdT", "broker-z:2")
    text = await run(
        admin,
        "updateTopic",
        brokerAddr=broker.address,
        topic="OrdT",
        writeQueueNums=3,
        order="TRUE",
    )
    assert "set broker orderConf. isOrder=true, orderConf=[broker-a:3]" in text
    conf = await admin.namesrv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, "OrdT")
    assert conf == "broker-z:2;broker-a:3"


async def test_delete_topic_removes_it_from_broker_and_name_server(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    await admin.create_topic(broker.address, TopicConfig("AdminDel", 2, 2))
    await wait_route(namesrv.address, "AdminDel", timeout=10)
    text = await run(admin, "deleteTopic", topic="AdminDel", clusterName="DefaultCluster")
    assert text == (
        "delete topic [AdminDel] from cluster [DefaultCluster] success.\n"
        "delete topic [AdminDel] from NameServer success.\n"
    )
    table = await admin.broker.get_all_topic_config(broker.address)
    assert "AdminDel" not in table.topic_config_table
    assert await get_route(namesrv.address, "AdminDel") is None
    with pytest.raises(NoRouteError):
        await admin.examine_topic_route("AdminDel")


async def test_unknown_cluster_is_an_error_not_a_silent_no_op(
    admin: MQAdmin, broker: BrokerController
) -> None:
    with pytest.raises(MQAdminError, match="cluster \\[NoSuch\\] not found"):
        await run(admin, "deleteTopic", topic="T", clusterName="NoSuch")
    assert await admin.master_addrs("DefaultCluster") == [broker.address]
    assert await admin.broker_name_by_addr(broker.address) == "broker-a"
    with pytest.raises(MQAdminError):
        await admin.broker_name_by_addr("127.0.0.1:1")


async def test_broker_refusal_carries_code_and_remark(
    admin: MQAdmin, broker: BrokerController
) -> None:
    with pytest.raises(MQBrokerError) as info:
        await admin.create_topic(broker.address, TopicConfig("bad topic!"))
    assert info.value.code == ResponseCode.SYSTEM_ERROR
    assert info.value.address == broker.address
    assert info.value.remark


async def test_subscription_group_update_and_delete(
    admin: MQAdmin, broker: BrokerController
) -> None:
    text = await run(
        admin, "updateSubGroup", brokerAddr=broker.address, groupName="G1",
        retryMaxTimes=3, brokerId=1, whichBrokerWhenConsumeSlowly=1, consumeEnable="false",
    )  # fmt: skip
    assert text.startswith(f"create subscription group to {broker.address} success.\n")
    assert "SubscriptionGroupConfig [groupName=G1, consumeEnable=false" in text
    groups = await admin.broker.get_all_subscription_group(broker.address)
    assert groups.subscription_group_table["G1"] == SubscriptionGroupConfig(
        "G1",
        consume_enable=False,
        consume_from_min_enable=False,
        consume_broadcast_enable=False,
        retry_max_times=3,
        broker_id=1,
    )
    text = await run(admin, "deleteSubGroup", brokerAddr=broker.address, groupName="G1")
    assert text == f"delete subscription group [G1] from broker [{broker.address}] success.\n"
    groups = await admin.broker.get_all_subscription_group(broker.address)
    assert "G1" not in groups.subscription_group_table


async def test_sub_group_needs_broker_or_cluster(admin: MQAdmin) -> None:
    with pytest.raises(commands.UsageError):
        await run(admin, "updateSubGroup", groupName="G")


async def test_topic_list_and_route_commands(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    await admin.create_topic(broker.address, TopicConfig("AdminT3", 2, 2))
    await wait_route(namesrv.address, "AdminT3", timeout=10)
    names = (await run(admin, "topicList")).splitlines()
    assert "AdminT3" in names
    assert "TBW102" in names
    route = await run(admin, "topicRoute", topic="AdminT3")
    assert route.startswith('{\n\t"brokerDatas":[\n')
    assert f'\t\t\t"brokerAddrs":{{0:"{broker.address}"\n\t\t\t}},\n' in route
    listed = (await run(admin, "topicRoute", topic="AdminT3", list=True)).splitlines()
    assert listed[1].split()[:5] == [
        "DefaultCluster",
        "broker-a",
        f"{{0={broker.address}}}",
        "2",
        "2",
    ]
    rows = (await run(admin, "topicList", clusterModel=True)).splitlines()
    assert rows[0].split() == ["#Cluster", "Name", "#Topic", "#Consumer", "Group"]
    mine = [r for r in rows if r.split()[1:2] == ["AdminT3"]]
    assert [r.split() for r in mine] == [["DefaultCluster", "AdminT3"]]


async def test_cluster_list_shows_the_broker(admin: MQAdmin, broker: BrokerController) -> None:
    lines = (await run(admin, "clusterList", moreStats=False)).splitlines()
    assert lines[0].startswith(
        "#Cluster Name".ljust(16) + "  " + "#Broker Name".ljust(22) + "  #BID  #Addr"
    )
    assert len(lines) == 2
    assert lines[1].split()[:4] == ["DefaultCluster", "broker-a", "0", broker.address]


async def test_name_server_operations_need_an_address() -> None:
    async with MQAdmin(None) as admin:
        with pytest.raises(NoNameServerError, match="NAMESRV_ADDR"):
            await admin.fetch_all_topic_list()


async def test_unreachable_broker_is_a_connect_error(admin: MQAdmin) -> None:
    with pytest.raises(MQConnectError):
        await admin.fetch_broker_runtime_stats("127.0.0.1:1")


async def test_topic_stats_of_a_topic_without_route(
    admin: MQAdmin, broker: BrokerController
) -> None:
    with pytest.raises(NoRouteError):
        await admin.examine_topic_stats("NoSuchTopic")


async def test_delete_sub_group_by_cluster_also_deletes_its_retry_and_dlq_topics(
    admin: MQAdmin, broker: BrokerController, namesrv: NamesrvController
) -> None:
    await run(admin, "updateSubGroup", clusterName="DefaultCluster", groupName="G2")
    await admin.create_topic(broker.address, TopicConfig("%RETRY%G2", 1, 1))
    await wait_route(namesrv.address, "%RETRY%G2", timeout=10)
    text = await run(admin, "deleteSubGroup", clusterName="DefaultCluster", groupName="G2")
    assert text.splitlines() == [
        f"delete subscription group [G2] from broker [{broker.address}] in cluster "
        "[DefaultCluster] success.",
        "delete topic [%RETRY%G2] from cluster [DefaultCluster] success.",
        "delete topic [%RETRY%G2] from NameServer success.",
        "delete topic [%DLQ%G2] from cluster [DefaultCluster] success.",
        "delete topic [%DLQ%G2] from NameServer success.",
    ]
    groups = await admin.broker.get_all_subscription_group(broker.address)
    assert "G2" not in groups.subscription_group_table
    topics = await admin.broker.get_all_topic_config(broker.address)
    assert "%RETRY%G2" not in topics.topic_config_table
    assert await get_route(namesrv.address, "%RETRY%G2") is None
