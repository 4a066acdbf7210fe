"""HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP and
NOTIFY_CONSUMER_IDS_CHANGED on a real server, plus pulls that use the
heartbeat's subscription."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.client_manage import (
    ClientManageProcessor,
    ConsumerIdsChangedNotifier,
)
from aiorocketmq.common.protocol_bodies import (
    ConsumerData,
    ConsumerListBody,
    HeartbeatData,
    ProducerData,
    build_subscription_data,
)
from aiorocketmq.common.tag_hash import java_string_hash
from aiorocketmq.remoting.broker_headers import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.frame import decode_frame_payload
from tests.support.vectors import load_jsonl
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness, pull_request
from tests.unit.store.store_support import dispatched, inner, put_ok


def _with_client_manage(ctx: BrokerContext, table: ProcessorTable) -> None:
    ClientManageProcessor(ctx).register(table)


@contextlib.asynccontextmanager
async def broker(tmp_path: Path, **kwargs: Any) -> AsyncIterator[Harness]:
    async with harness(tmp_path, extra=_with_client_manage, **kwargs) as h:
        yield h


def heartbeat(
    client_id: str, *, group: str = GROUP, tags: str = "*", version: int = 0
) -> RemotingCommand:
    data = HeartbeatData(
        client_id,
        producers=[ProducerData("PID_test")],
        consumers=[
            ConsumerData(group, subscriptions=[build_subscription_data(TOPIC, tags, version)])
        ],
    )
    return RemotingCommand(code=RequestCode.HEART_BEAT, body=data.encode())


def consumer_list(group: str) -> RemotingCommand:
    fields = GetConsumerListByGroupRequestHeader(group).to_ext_fields()
    return RemotingCommand(code=RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields=fields)


async def test_captured_heartbeats_register_groups_and_retry_topics(tmp_path: Path) -> None:
    frames = [
        v
        for name in ("cpp_client.jsonl", "alions_client.jsonl")
        for v in load_jsonl(name)
        if v["code"] == RequestCode.HEART_BEAT and not v["is_response"]
    ]
    assert frames
    async with broker(tmp_path) as h:
        conn = await h.client.connection(h.address)
        for vec in frames:
            request = decode_frame_payload(bytes.fromhex(vec["frame_hex"])[4:])
            reply = await conn.invoke(request, 3)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            sent = HeartbeatData.decode(request.body)
            for consumer in sent.consumers:
                info = h.ctx.consumers.get_group(consumer.group_name)
                assert info is not None
                assert sent.client_id in info.client_ids()
                retry = h.ctx.topics.select_topic_config("%RETRY%" + consumer.group_name)
                assert retry is not None
                assert (retry.read_queue_nums, retry.write_queue_nums, retry.perm) == (1, 1, 6)
                for sub in info.subscriptions.values():
                    assert sub.code_set == frozenset(java_string_hash(t) for t in sub.tags_set)
            for producer in sent.producers:
                assert h.ctx.producers.connections(producer.group_name)


async def test_consumer_list_and_unregister(tmp_path: Path) -> None:
    async with broker(tmp_path) as h:
        reply = await h.invoke(consumer_list(GROUP))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark == f"no consumer for this group, {GROUP}"
        assert (await h.invoke(heartbeat("10.0.0.1@1"))).code == ResponseCode.SUCCESS
        reply = await h.invoke(consumer_list(GROUP))
        assert reply.code == ResponseCode.SUCCESS
        assert ConsumerListBody.decode(reply.body).consumer_id_list == ["10.0.0.1@1"]
        fields = UnregisterClientRequestHeader(
            "10.0.0.1@1", producer_group="PID_test", consumer_group=GROUP
        ).to_ext_fields()
        reply = await h.invoke(
            RemotingCommand(code=RequestCode.UNREGISTER_CLIENT, ext_fields=fields)
        )
        assert reply.code == ResponseCode.SUCCESS
        assert h.ctx.consumers.get_group(GROUP) is None
        assert not h.ctx.producers.connections("PID_test")


async def test_pull_uses_the_heartbeat_subscription(tmp_path: Path) -> None:
    async with broker(tmp_path) as h:
        await h.invoke(heartbeat("10.0.0.1@1", tags="b", version=5))
        await put_ok(h.ctx.store, inner(b"x", TAGS="a"))
        await put_ok(h.ctx.store, inner(b"y", TAGS="b"))
        await dispatched(h.ctx.store)
        reply = await h.invoke(pull_request(0, sys_flag=0, sub_version=5))
        assert reply.code == ResponseCode.SUCCESS
        assert reply.ext_fields["nextBeginOffset"] == "2"
        reply = await h.invoke(pull_request(0, sys_flag=0, sub_version=6))
        assert reply.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
        reply = await h.invoke(pull_request(0, sys_flag=0, topic="%RETRY%" + GROUP))
        assert reply.code == ResponseCode.SUBSCRIPTION_NOT_EXIST


async def test_second_consumer_joining_notifies_the_first(tmp_path: Path) -> None:
    async with broker(tmp_path) as h:
        notifier = ConsumerIdsChangedNotifier(h.server)
        h.ctx.consumers.set_listener(notifier)
        received: dict[str, list[str]] = {"a": [], "b": []}
        clients = {}
        for name in ("a", "b"):
            table = ProcessorTable()

            def on_notify(
                conn: RemotingConnection, request: RemotingCommand, name: str = name
            ) -> None:
                received[name].append(request.ext_fields["consumerGroup"])
                assert request.is_oneway

            table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_notify)
            clients[name] = RemotingClient(processors=table)
        try:
            await clients["a"].invoke(h.address, heartbeat("10.0.0.1@a"), 3000)
            await wait_until(lambda: len(received["a"]) == 1, what="a notified of itself")
            await clients["a"].invoke(h.address, heartbeat("10.0.0.1@a"), 3000)
            await clients["b"].invoke(h.address, heartbeat("10.0.0.1@b"), 3000)
            await wait_until(lambda: len(received["a"]) == 2, what="a notified of b")
            await wait_until(lambda: len(received["b"]) == 1, what="b notified")
            await notifier.wait_sent()
            assert received["a"] == [GROUP, GROUP]
        finally:
            for client in clients.values():
                await client.close()
