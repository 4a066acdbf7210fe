"""AdminProcessor on a real store, server and client: topic/group changes and config dumps."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.offsets import ConsumerOffsetManager
from aiorocketmq.broker.processors.admin import SLAVE_REMARK, AdminProcessor
from aiorocketmq.broker.processors.consumer_manage import ConsumerManageProcessor
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.common.admin_bodies import (
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
    SubscriptionGroupWrapper,
)
from aiorocketmq.common.clock import SystemClock
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from aiorocketmq.remoting.broker_admin_headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.store.config import BrokerRole
from tests.unit.broker.broker_support import TOPIC, Harness, harness
from tests.unit.broker.processor_support import send_request
from tests.unit.store.store_support import dispatched

R = RequestCode


@contextlib.asynccontextmanager
async def admin_harness(
    tmp_path: Path, delay_offsets: Callable[[], str] | None = None
) -> AsyncIterator[Harness]:
    def extra(ctx: BrokerContext, table: ProcessorTable) -> None:
        SendProcessor(ctx).register(table)
        ConsumerManageProcessor(ctx).register(table)
        AdminProcessor(ctx, delay_offsets=delay_offsets).register(table)

    async with harness(tmp_path, extra=extra) as h:
        yield h


def create_topic(topic: str, **overrides: object) -> RemotingCommand:
    values: dict[str, object] = {
        "topic": topic,
        "default_topic": "TBW102",
        "read_queue_nums": 3,
        "write_queue_nums": 2,
        "perm": 6,
        "topic_filter_type": "SINGLE_TAG",
        "topic_sys_flag": 0,
        "order": False,
    }
    values.update(overrides)
    header = CreateTopicRequestHeader(**values)  # type: ignore[arg-type]
    return RemotingCommand.request(R.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())


def request(code: int, body: bytes = b"", **fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, dict(fields), body)


# -- topics ----------------------------------------------------------------------------


async def test_create_topic_updates_manager_listeners_and_file(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    async with admin_harness(tmp_path) as h:
        versions: list[DataVersion] = []
        h.ctx.topics.add_change_listener(versions.append)
        before = h.ctx.topics.data_version
        reply = await h.invoke(create_topic("NewTopic", topic_sys_flag=2, order=True))
        assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
        # Java ignores the header's order flag here; the rest is taken as sent.
        assert h.ctx.topics.select_topic_config("NewTopic") == TopicConfig(
            "NewTopic", 3, 2, 6, "SINGLE_TAG", 2, False
        )
        assert versions == [h.ctx.topics.data_version]
        assert h.ctx.topics.data_version.counter == before.counter + 1
        # an update replaces the config
        reply = await h.invoke(create_topic("NewTopic", read_queue_nums=8, perm=4))
        assert reply.code == ResponseCode.SUCCESS
        assert h.ctx.topics.select_topic_config("NewTopic") == TopicConfig(
            "NewTopic", 8, 2, 4, "SINGLE_TAG", 0, False
        )
        await h.ctx.topics.flush()
        path = h.ctx.topics.path
    # written atomically (temp file renamed over, previous copy kept as .bak), in
    # RocketMQ's PrettyFormat, and read back by a fresh manager
    names = {p.name for p in path.parent.iterdir() if p.name.startswith("topics")}
    assert names == {"topics.json", "topics.json.bak"}
    assert path.read_text().startswith('{\n\t"dataVersion":{')
    fresh = TopicConfigManager(path, executor, h.ctx.config, SystemClock())
    assert await fresh.load()
    assert fresh.select_topic_config("NewTopic") == TopicConfig("NewTopic", 8, 2, 4)
    assert fresh.data_version == h.ctx.topics.data_version


@pytest.mark.parametrize(
    ("topic", "remark"),
    [
        ("", "The specified topic is blank."),
        ("  ", "The specified topic is blank."),
        (
            "bad topic!",
            "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$",
        ),
        ("T" * 128, "The specified topic is longer than topic max length."),
        ("TBW102", "The topic[TBW102] is conflict with system topic."),
        ("SCHEDULE_TOPIC_XXXX", "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic."),
        ("rmq_sys_mine", "The topic[rmq_sys_mine] is conflict with system topic."),
    ],
)
async def test_create_and_delete_refuse_bad_and_system_topics(
    tmp_path: Path, topic: str, remark: str
) -> None:
    async with admin_harness(tmp_path) as h:
        before = h.ctx.topics.topic_config_table()
        reply = await h.invoke(create_topic(topic))
        assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        delete = DeleteTopicRequestHeader(topic).to_ext_fields()
        reply = await h.invoke(RemotingCommand.request(R.DELETE_TOPIC_IN_BROKER, delete))
        assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, remark)
        assert h.ctx.topics.topic_config_table() == before


async def test_broker_name_topic_is_a_system_topic(tmp_path: Path) -> None:
    async with admin_harness(tmp_path) as h:
        name = h.ctx.config.broker_name
        reply = await h.invoke(create_topic(name))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark == f"The topic[{name}] is conflict with system topic."


async def test_bad_headers_answer_errors_and_the_server_keeps_serving(tmp_path: Path) -> None:
    async with admin_harness(tmp_path) as h:
        fields = create_topic("T1").ext_fields
        del fields["perm"]
        reply = await h.invoke(RemotingCommand.request(R.UPDATE_AND_CREATE_TOPIC, fields))
        assert (reply.code, reply.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "the custom field <perm> is null",
        )
        reply = await h.invoke(create_topic("T1", read_queue_nums="x"))  # type: ignore[arg-type]
        assert reply.code == ResponseCode.SYSTEM_ERROR and "readQueueNums" in str(reply.remark)
        reply = await h.invoke(create_topic("T1", topic_filter_type="WRONG"))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark == "No enum constant org.apache.rocketmq.common.TopicFilterType.WRONG"
        for code in (R.DELETE_TOPIC_IN_BROKER, R.DELETE_SUBSCRIPTIONGROUP):
            reply = await h.invoke(request(code))
            assert reply.code == ResponseCode.SYSTEM_ERROR and "is null" in str(reply.remark)
        assert h.ctx.topics.select_topic_config("T1") is None
        reply = await h.invoke(create_topic("T1"))
        assert reply.code == ResponseCode.SUCCESS


async def test_slave_refuses_changes(tmp_path: Path) -> None:
    async with admin_harness(tmp_path) as h:
        h.ctx.store_config = h.ctx.store_config.model_copy(update={"broker_role": BrokerRole.SLAVE})
        group = SubscriptionGroupConfig("CID_s").encode()
        for req in (
            create_topic("T2"),
            RemotingCommand.request(
                R.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(TOPIC).to_ext_fields()
            ),
            request(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, group),
            request(R.DELETE_SUBSCRIPTIONGROUP, groupName="TOOLS_CONSUMER"),
        ):
            reply = await h.invoke(req)
            assert (reply.code, reply.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
        assert h.ctx.topics.select_topic_config(TOPIC) is not None
        assert h.ctx.topics.select_topic_config("T2") is None
        assert not h.ctx.groups.contains("CID_s") and h.ctx.groups.contains("TOOLS_CONSUMER")
        # the dumps still answer on a slave
        reply = await h.invoke(request(R.GET_ALL_TOPIC_CONFIG))
        assert reply.code == ResponseCode.SUCCESS


async def test_delete_topic_drops_config_and_queues(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    async with admin_harness(tmp_path) as h:
        for queue_id in (0, 1):
            reply = await h.invoke(send_request(queue_id=queue_id))
            assert reply.code == ResponseCode.SUCCESS
        assert (await h.invoke(create_topic("Other"))).code == ResponseCode.SUCCESS
        assert (await h.invoke(send_request(topic="Other"))).code == ResponseCode.SUCCESS
        await dispatched(h.ctx.store)
        h.ctx.offsets.commit_offset("client", "CID_a", TOPIC, 0, 1)
        assert h.ctx.store.get_max_offset_in_queue(TOPIC, 1) == 1
        queue_dir = h.ctx.store.config.consume_queue_dir / TOPIC
        assert queue_dir.exists()

        delete = DeleteTopicRequestHeader(TOPIC).to_ext_fields()
        reply = await h.invoke(RemotingCommand.request(R.DELETE_TOPIC_IN_BROKER, delete))
        assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)

        assert h.ctx.topics.select_topic_config(TOPIC) is None
        assert h.ctx.store.cq_table.get(TOPIC, 0) is None
        assert not (queue_dir / "0").exists() and not (queue_dir / "1").exists()
        max_offset = await h.invoke(request(R.GET_MAX_OFFSET, topic=TOPIC, queueId="1"))
        assert max_offset.ext_fields["offset"] == "0"
        # other topics keep their queues; 4.9.8 keeps consumer offsets
        assert h.ctx.store.get_max_offset_in_queue("Other", 0) == 1
        assert h.ctx.offsets.query_offset("CID_a", TOPIC, 0) == 1
        # deleting a topic that is not there is SUCCESS too
        reply = await h.invoke(RemotingCommand.request(R.DELETE_TOPIC_IN_BROKER, delete))
        assert reply.code == ResponseCode.SUCCESS
        await h.ctx.topics.flush()
    fresh = TopicConfigManager(h.ctx.topics.path, executor, h.ctx.config, SystemClock())
    assert await fresh.load()
    assert fresh.select_topic_config(TOPIC) is None
    assert fresh.select_topic_config("Other") is not None


async def test_get_all_topic_config(tmp_path: Path) -> None:
    async with admin_harness(tmp_path) as h:
        reply = await h.invoke(request(R.GET_ALL_TOPIC_CONFIG))
        assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
        wrapper = TopicConfigSerializeWrapper.decode(reply.body)
        assert wrapper.topic_config_table == h.ctx.topics.topic_config_table()
        assert wrapper.topic_config_table[TOPIC] == TopicConfig(TOPIC, 4, 4)
        assert "TBW102" in wrapper.topic_config_table
        assert wrapper.data_version == h.ctx.topics.data_version
        # fastjson's field order
        assert reply.body.startswith(b'{"dataVersion":{"counter":')


# -- subscription groups --------------------------------------------------------------------


JAVA_GROUP_BODY = (
    b'{"brokerId":1,"consumeBroadcastEnable":false,"consumeEnable":true,'
    b'"consumeFromMinEnable":false,"groupName":"CID_admin","notifyConsumerIdsChangedEnable":false,'
    b'"retryMaxTimes":3,"retryQueueNums":2,"whichBrokerWhenConsumeSlowly":1}'
)
JAVA_GROUP = SubscriptionGroupConfig(
    "CID_admin",
    consume_enable=True,
    consume_from_min_enable=False,
    consume_broadcast_enable=False,
    retry_queue_nums=2,
    retry_max_times=3,
    broker_id=1,
    notify_consumer_ids_changed_enable=False,
)


async def test_create_group_dump_and_persist(tmp_path: Path, executor: BlockingExecutor) -> None:
    async with admin_harness(tmp_path) as h:
        reply = await h.invoke(request(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, JAVA_GROUP_BODY))
        assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
        assert h.ctx.groups.find_subscription_group_config("CID_admin") == JAVA_GROUP

        reply = await h.invoke(request(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        assert reply.code == ResponseCode.SUCCESS
        wrapper = SubscriptionGroupWrapper.decode(reply.body)
        assert wrapper.subscription_group_table["CID_admin"] == JAVA_GROUP
        assert "TOOLS_CONSUMER" in wrapper.subscription_group_table
        assert wrapper.data_version == h.ctx.groups.data_version
        await h.ctx.groups.flush()
        path = h.ctx.groups.path
    fresh = SubscriptionGroupManager(path, executor, h.ctx.config, SystemClock())
    assert await fresh.load()
    assert fresh.subscription_group_table()["CID_admin"] == JAVA_GROUP
    assert fresh.data_version == h.ctx.groups.data_version


async def test_create_group_bad_and_empty_bodies(tmp_path: Path) -> None:
    async with admin_harness(tmp_path) as h:
        version = h.ctx.groups.data_version
        for body in (b"{not json", b'{"retryMaxTimes":3}', b'["CID_x"]'):
            reply = await h.invoke(request(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body))
            assert reply.code == ResponseCode.SYSTEM_ERROR
            assert str(reply.remark).startswith("bad SubscriptionGroupConfig body: ")
        # Java decodes a missing body as null and answers SUCCESS without a change
        reply = await h.invoke(request(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP))
        assert reply.code == ResponseCode.SUCCESS
        assert h.ctx.groups.data_version == version


async def test_delete_group_with_and_without_offsets(tmp_path: Path) -> None:
    async with admin_harness(tmp_path) as h:
        for group in ("CID_keep", "CID_drop"):
            body = SubscriptionGroupConfig(group).encode()
            assert (await h.invoke(request(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body))).code == 0
            h.ctx.offsets.commit_offset("client", group, TOPIC, 0, 7)

        fields = DeleteSubscriptionGroupRequestHeader("CID_keep").to_ext_fields()
        reply = await h.invoke(RemotingCommand.request(R.DELETE_SUBSCRIPTIONGROUP, fields))
        assert reply.code == ResponseCode.SUCCESS
        assert not h.ctx.groups.contains("CID_keep")
        assert h.ctx.offsets.query_offset("CID_keep", TOPIC, 0) == 7

        fields = DeleteSubscriptionGroupRequestHeader("CID_drop", True).to_ext_fields()
        reply = await h.invoke(RemotingCommand.request(R.DELETE_SUBSCRIPTIONGROUP, fields))
        assert reply.code == ResponseCode.SUCCESS
        assert not h.ctx.groups.contains("CID_drop")
        assert h.ctx.offsets.query_offset("CID_drop", TOPIC, 0) == -1

        # an unknown group: Java logs and answers SUCCESS
        version = h.ctx.groups.data_version
        reply = await h.invoke(request(R.DELETE_SUBSCRIPTIONGROUP, groupName="CID_never"))
        assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
        assert h.ctx.groups.data_version == version


# -- offset dumps -----------------------------------------------------------------------------


async def test_get_all_consumer_offset(tmp_path: Path, executor: BlockingExecutor) -> None:
    async with admin_harness(tmp_path) as h:
        reply = await h.invoke(request(R.GET_ALL_CONSUMER_OFFSET))
        assert (reply.code, reply.body) == (ResponseCode.SUCCESS, b'{"offsetTable":{}}')
        h.ctx.offsets.commit_offset("client", "CID_a", TOPIC, 0, 5)
        h.ctx.offsets.commit_offset("client", "CID_a", TOPIC, 3, 9)
        h.ctx.offsets.commit_offset("client", "CID_b", "%RETRY%CID_b", 0, 1)
        reply = await h.invoke(request(R.GET_ALL_CONSUMER_OFFSET))
        assert reply.code == ResponseCode.SUCCESS
        assert b'"TopicTest@CID_a":{0:5,3:9}' in reply.body  # fastjson's bare queue ids
        assert ConsumerOffsetSerializeWrapper.decode(reply.body).offset_table == {
            "TopicTest@CID_a": {0: 5, 3: 9},
            "%RETRY%CID_b@CID_b": {0: 1},
        }
        await h.ctx.offsets.flush()
    fresh = ConsumerOffsetManager(h.ctx.offsets.path, executor)
    assert await fresh.load()
    assert fresh.query_offset("CID_a", TOPIC, 3) == 9


async def test_get_all_delay_offset_without_schedule_service(tmp_path: Path) -> None:
    async with admin_harness(tmp_path) as h:
        reply = await h.invoke(request(R.GET_ALL_DELAY_OFFSET))
        assert (reply.code, reply.body) == (ResponseCode.SUCCESS, b'{"offsetTable":{}}')


async def test_get_all_delay_offset_from_schedule_service(tmp_path: Path) -> None:
    content = ['{"offsetTable":{1:4,2:0}}']
    async with admin_harness(tmp_path, delay_offsets=lambda: content[0]) as h:
        reply = await h.invoke(request(R.GET_ALL_DELAY_OFFSET))
        assert reply.code == ResponseCode.SUCCESS
        assert DelayOffsetSerializeWrapper.decode(reply.body).offset_table == {1: 4, 2: 0}
        content[0] = ""
        reply = await h.invoke(request(R.GET_ALL_DELAY_OFFSET))
        assert (reply.code, reply.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "No delay offset in this broker",
        )
