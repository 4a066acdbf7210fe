"""PULL_MESSAGE on a real store over a real connection: statuses, filters,
long polling, suggestWhichBrokerId and the slave rules."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import decode_frame_payload
from aiorocketmq.store.config import BrokerRole
from tests.support.vectors import load_jsonl
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness, pull_request
from tests.unit.store.store_support import dispatched, inner, put_ok

FIELDS = ("suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset")


async def put_n(h: Harness, n: int, *, queue_id: int = 0, tags: str = "a") -> None:
    for i in range(n):
        await put_ok(h.ctx.store, inner(f"m{i}".encode(), queue_id=queue_id, TAGS=tags))
    await dispatched(h.ctx.store)


def stored_bytes(h: Harness, queue_id: int, offset: int, n: int) -> bytes:
    result = h.ctx.store.get_message(GROUP, TOPIC, queue_id, offset, n)
    assert result is not None
    try:
        return result.body()
    finally:
        result.release()


def assert_fields(reply: RemotingCommand) -> dict[str, int]:
    for name in FIELDS:
        assert isinstance(reply.ext_fields[name], str), name
    return {name: int(reply.ext_fields[name]) for name in FIELDS}


async def test_found_body_is_the_stored_records(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 3)
        reply = await h.invoke(pull_request(0, sys_flag=0x4))
        assert reply.code == ResponseCode.SUCCESS
        assert reply.remark == "FOUND"
        assert bytes(reply.body) == stored_bytes(h, 0, 0, 3)
        f = assert_fields(reply)
        assert f == {
            "suggestWhichBrokerId": 0,
            "nextBeginOffset": 3,
            "minOffset": 0,
            "maxOffset": 3,
        }


async def test_not_found_without_suspend_and_tag_mismatch_and_offset_moved(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 2)
        reply = await h.invoke(pull_request(2, sys_flag=0x4))
        assert reply.code == ResponseCode.PULL_NOT_FOUND
        assert reply.remark == "OFFSET_OVERFLOW_ONE"
        assert_fields(reply)
        reply = await h.invoke(pull_request(0, sys_flag=0x4, subscription="b || c"))
        assert reply.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert assert_fields(reply)["nextBeginOffset"] == 2
        reply = await h.invoke(pull_request(50, sys_flag=0x4))
        assert reply.code == ResponseCode.PULL_OFFSET_MOVED
        assert reply.remark == "OFFSET_OVERFLOW_BADLY"
        reply = await h.invoke(pull_request(0, queue_id=3, sys_flag=0x4))
        assert reply.code == ResponseCode.PULL_NOT_FOUND  # empty queue asked from 0
        reply = await h.invoke(pull_request(5, queue_id=3, sys_flag=0x4))
        assert reply.code == ResponseCode.PULL_OFFSET_MOVED


async def test_tag_filter_returns_only_matching(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 2, tags="a")
        await put_n(h, 1, tags="b")
        reply = await h.invoke(pull_request(0, sys_flag=0x4, subscription="b"))
        assert reply.code == ResponseCode.SUCCESS
        assert bytes(reply.body) == stored_bytes(h, 0, 2, 1)


async def test_checks(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        reply = await h.invoke(pull_request(0, topic="Nope"))
        assert reply.code == ResponseCode.TOPIC_NOT_EXIST
        reply = await h.invoke(pull_request(0, queue_id=4))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert (reply.remark or "").startswith("queueId[4] is illegal, topic:[TopicTest]")
        reply = await h.invoke(pull_request(0, sys_flag=0))
        assert reply.code == ResponseCode.SUBSCRIPTION_NOT_EXIST
        h.ctx.groups.update_subscription_group_config(
            SubscriptionGroupConfig("off", consume_enable=False)
        )
        reply = await h.invoke(pull_request(0, group="off"))
        assert reply.code == ResponseCode.NO_PERMISSION
    async with harness(tmp_path / "b", broker={"auto_create_subscription_group": False}) as h:
        reply = await h.invoke(pull_request(0))
        assert reply.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    async with harness(tmp_path / "c", broker={"broker_permission": 2}) as h:
        reply = await h.invoke(pull_request(0))
        assert reply.code == ResponseCode.NO_PERMISSION
        assert reply.remark == "the broker[127.0.0.1] pulling message is forbidden"


async def test_commit_offset_stored_only_on_master_with_bit(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 1)
        await h.invoke(pull_request(0, sys_flag=0x4, commit_offset=7))
        assert h.ctx.offsets.query_offset(GROUP, TOPIC, 0) == -1
        await h.invoke(pull_request(0, sys_flag=0x5, commit_offset=7))
        assert h.ctx.offsets.query_offset(GROUP, TOPIC, 0) == 7
        h.ctx.store_config = h.ctx.store_config.model_copy(update={"broker_role": BrokerRole.SLAVE})
        await h.invoke(pull_request(0, sys_flag=0x5, commit_offset=9))
        assert h.ctx.offsets.query_offset(GROUP, TOPIC, 0) == 7


async def test_held_pull_answered_when_a_message_arrives(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        task = asyncio.ensure_future(h.invoke(pull_request(0)))
        await wait_until(lambda: h.hold.held_count == 1, what="pull held")
        assert not task.done()
        put_at = time.monotonic()
        await put_ok(h.ctx.store, inner(b"late", TAGS="a"))
        reply = await asyncio.wait_for(task, 1)
        # Woken by the arrival, not by the sweep (every 5 s with long polling): a
        # bound well under 5 s says which, without timing the event loop.
        assert time.monotonic() - put_at < 1.0
        assert reply.code == ResponseCode.SUCCESS
        assert bytes(reply.body) == stored_bytes(h, 0, 0, 1)


async def test_held_pull_times_out_with_not_found(tmp_path: Path) -> None:
    async with harness(tmp_path, long_polling_enable=False, short_polling_ms=50) as h:
        reply = await h.invoke(pull_request(0))
        assert reply.code == ResponseCode.PULL_NOT_FOUND
        assert h.hold.held_count == 0


async def test_hold_limit_gives_system_busy(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        h.hold.max_held = 0
        reply = await h.invoke(pull_request(0))
        assert reply.code == ResponseCode.SYSTEM_BUSY


async def test_suggest_which_broker_id(tmp_path: Path) -> None:
    # 1 KiB of RAM and 40 %: any consumer behind by more than ~400 bytes is slow.
    async with harness(tmp_path, total_physical_memory=1024) as h:
        await put_n(h, 20)
        slow = await h.invoke(pull_request(0, sys_flag=0x4, max_msgs=1))
        assert slow.code == ResponseCode.SUCCESS
        assert slow.ext_fields["suggestWhichBrokerId"] == "0"  # slaveReadEnable off
        h.ctx.config = h.ctx.config.model_copy(update={"slave_read_enable": True})
        slow = await h.invoke(pull_request(0, sys_flag=0x4, max_msgs=1))
        assert slow.ext_fields["suggestWhichBrokerId"] == "1"
        ok = await h.invoke(pull_request(19, sys_flag=0x4))
        assert ok.ext_fields["suggestWhichBrokerId"] == "0"
        h.ctx.groups.update_subscription_group_config(
            SubscriptionGroupConfig(GROUP, broker_id=2, which_broker_when_consume_slowly=3)
        )
        ok = await h.invoke(pull_request(19, sys_flag=0x4))
        assert ok.ext_fields["suggestWhichBrokerId"] == "2"
        slow = await h.invoke(pull_request(0, sys_flag=0x4, max_msgs=1))
        assert slow.ext_fields["suggestWhichBrokerId"] == "3"


async def test_slave_serves_pulls_and_retries_moved_offsets(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 2)
        h.ctx.store_config = h.ctx.store_config.model_copy(update={"broker_role": BrokerRole.SLAVE})
        h.ctx.groups.update_subscription_group_config(SubscriptionGroupConfig(GROUP, broker_id=1))
        # SLAVE without slaveReadEnable: Java's 20 is overwritten; served, suggest 0.
        reply = await h.invoke(pull_request(0, sys_flag=0x4))
        assert reply.code == ResponseCode.SUCCESS
        assert reply.ext_fields["suggestWhichBrokerId"] == "0"
        moved = await h.invoke(pull_request(50, sys_flag=0x4))
        assert moved.code == ResponseCode.PULL_RETRY_IMMEDIATELY
        assert moved.ext_fields["suggestWhichBrokerId"] == "1"
        h.ctx.store_config = h.ctx.store_config.model_copy(update={"offset_check_in_slave": True})
        moved = await h.invoke(pull_request(50, sys_flag=0x4))
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED


def _captured(name: str, code: int) -> list[dict[str, object]]:
    return [v for v in load_jsonl(name) if v["code"] == code and not v["is_response"]]


async def test_captured_client_pulls_are_served_without_heartbeat(tmp_path: Path) -> None:
    frames = _captured("cpp_client.jsonl", 11) + _captured("alions_client.jsonl", 11)
    assert frames
    async with harness(tmp_path) as h:
        conn = await h.client.connection(h.address)
        for vec in frames:
            request = decode_frame_payload(bytes.fromhex(str(vec["frame_hex"]))[4:])
            fields = dict(request.ext_fields)
            topic = str(fields["topic"])
            if h.ctx.topics.select_topic_config(topic) is None:
                h.ctx.topics.update_topic_config(TopicConfig(topic, 8, 8))
            fields["suspendTimeoutMillis"] = "0"
            fields["sysFlag"] = str(int(str(fields["sysFlag"])) & ~0x2)
            request.ext_fields = {k: str(v) for k, v in fields.items()}
            reply = await conn.invoke(request, 3)
            assert reply.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED)
            assert_fields(reply)


async def test_held_pull_ignores_other_tags(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        task = asyncio.ensure_future(h.invoke(pull_request(0, subscription="b")))
        await wait_until(lambda: h.hold.held_count == 1, what="pull held")
        await put_n(h, 1, tags="a")
        assert h.hold.held_count == 1
        assert not task.done()
        await put_ok(h.ctx.store, inner(b"b", TAGS="b"))
        reply = await asyncio.wait_for(task, 1)
        assert reply.code == ResponseCode.SUCCESS
        assert bytes(reply.body) == stored_bytes(h, 0, 1, 1)
