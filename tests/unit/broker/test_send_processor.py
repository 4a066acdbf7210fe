"""SendProcessor on a real store and server: captured client frames and built requests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.broker.processors import send as send_module
from aiorocketmq.broker.timed_message import TIMER_PROPERTIES
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.store.config import BrokerRole
from aiorocketmq.store.message_store import MessageStore
from tests.support.vectors import load_jsonl
from tests.unit.broker.processor_support import (
    STORE_HOST,
    TOPIC,
    SendHarness,
    send_harness,
    send_request,
)
from tests.unit.store.store_support import dispatched


def _client_frames(name: str, codes: tuple[int, ...]) -> list[dict[str, Any]]:
    return [
        line
        for line in load_jsonl(name)
        if line["origin"] == "client"
        and line["code"] in codes
        and line["direction"].endswith("broker")
    ]


def _assert_string_fields(reply: RemotingCommand) -> None:
    assert all(isinstance(v, str) for v in reply.ext_fields.values()), reply.ext_fields


def _stored(store: MessageStore, reply: RemotingCommand) -> Any:
    first = reply.ext_fields["msgId"].split(",")[0]
    _, _, offset = decode_offset_msg_id(first)
    msg = store.look_message_by_offset(offset)
    assert msg is not None
    return msg


def _tags_code_in_cq(store: MessageStore, topic: str, queue_id: int, offset: int) -> int:
    queue = store.cq_table.get(topic, queue_id)
    assert queue is not None
    unit = queue.get_unit(offset)
    assert unit is not None
    return unit[2]


def test_every_timer_property_holds_the_mark() -> None:
    """The send path asks the timer only about texts holding ``TIMER_MARK``."""
    assert TIMER_PROPERTIES
    assert all(name.startswith(send_module.TIMER_MARK) for name in TIMER_PROPERTIES)


async def test_cpp_send_frames_are_stored(tmp_path: Path) -> None:
    lines = _client_frames("cpp_client.jsonl", (RequestCode.SEND_MESSAGE,))
    frames = [bytes.fromhex(line["frame_hex"]) for line in lines]
    async with send_harness(tmp_path) as h:
        replies, local = await h.replay(frames)
        assert [r.code for r in replies] == [ResponseCode.SUCCESS] * len(frames)
        for reply in replies:
            _assert_string_fields(reply)
            assert reply.ext_fields["MSG_REGION"] == "DefaultRegion"
            assert reply.ext_fields["TRACE_ON"] == "true"
        batch = [
            r
            for r, line in zip(replies, lines, strict=True)
            if line["header"]["extFields"]["batch"] == "1"
        ]
        assert len(batch) == 1 and batch[0].ext_fields["msgId"].count(",") == 1
        first = _stored(h.ctx.store, replies[0])
        assert first.properties[MessageConst.PROPERTY_CLUSTER] == "DefaultCluster"
        assert MessageConst.PROPERTY_WAIT_STORE_MSG_OK not in first.properties
        assert first.properties["myprop"] == "myvalue"
        assert first.born_host == local
        assert first.store_host == STORE_HOST
        await dispatched(h.ctx.store)
        q = int(replies[0].ext_fields["queueId"])
        off = int(replies[0].ext_fields["queueOffset"])
        assert _tags_code_in_cq(h.ctx.store, TOPIC, q, off) == tags_code("TagA")


async def test_batch_keeps_wait_and_gets_cluster(tmp_path: Path) -> None:
    lines = _client_frames("cpp_client.jsonl", (RequestCode.SEND_MESSAGE,))
    batch = [line for line in lines if line["header"]["extFields"]["batch"] == "1"]
    async with send_harness(tmp_path) as h:
        replies, _ = await h.replay([bytes.fromhex(batch[0]["frame_hex"])])
        assert replies[0].code == ResponseCode.SUCCESS
        msg = _stored(h.ctx.store, replies[0])
        assert msg.properties[MessageConst.PROPERTY_CLUSTER] == "DefaultCluster"
        assert msg.properties[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] == "true"


async def test_alions_v2_frames_are_stored(tmp_path: Path) -> None:
    lines = _client_frames("alions_client.jsonl", (RequestCode.SEND_MESSAGE_V2,))
    assert lines
    async with send_harness(tmp_path) as h:
        replies, _ = await h.replay([bytes.fromhex(line["frame_hex"]) for line in lines])
        assert {r.code for r in replies} == {ResponseCode.SUCCESS}
        for reply in replies:
            _assert_string_fields(reply)


async def test_queue_offset_increments_per_queue(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        seen: dict[int, list[int]] = {0: [], 1: []}
        for i in range(6):
            reply = await h.invoke(send_request(queue_id=i % 2))
            assert reply.code == ResponseCode.SUCCESS
            assert reply.ext_fields["queueId"] == str(i % 2)
            seen[i % 2].append(int(reply.ext_fields["queueOffset"]))
        assert seen == {0: [0, 1, 2], 1: [0, 1, 2]}


async def test_v2_and_negative_queue_id_picks_a_writable_queue(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        reply = await h.invoke(send_request(queue_id=-1, code=RequestCode.SEND_MESSAGE_V2))
        assert reply.code == ResponseCode.SUCCESS
        assert 0 <= int(reply.ext_fields["queueId"]) < 4


async def test_queue_id_out_of_range(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        reply = await h.invoke(send_request(queue_id=4))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark is not None and reply.remark.startswith("request queueId[4] is illegal")


async def test_auto_create_on(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        reply = await h.invoke(send_request(topic="NewTopic", default_topic_queue_nums=2))
        assert reply.code == ResponseCode.SUCCESS
        config = h.ctx.topics.select_topic_config("NewTopic")
        assert config is not None and config.write_queue_nums == 2


async def test_auto_create_off(tmp_path: Path) -> None:
    async with send_harness(tmp_path, broker={"auto_create_topic_enable": False}) as h:
        reply = await h.invoke(send_request(topic="NewTopic"))
        assert reply.code == ResponseCode.TOPIC_NOT_EXIST
        assert reply.remark is not None
        assert reply.remark.startswith("topic[NewTopic] not exist, apply first please!")
        assert h.ctx.topics.select_topic_config("NewTopic") is None


async def test_illegal_topic_and_forbidden_topic(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        reply = await h.invoke(send_request(topic="bad topic!"))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark is not None and "illegal characters" in reply.remark
        reply = await h.invoke(send_request(topic="x" * 128))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        reply = await h.invoke(send_request(topic="SCHEDULE_TOPIC_XXXX"))
        assert reply.code == ResponseCode.NO_PERMISSION


async def test_topic_name_checks_hold_on_every_send(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The processor remembers names that passed the static checks, never refusals, and
    empties its memos when full: every send of a bad name is refused, the memos stay
    bounded, and good names are stored before and after a memo was emptied."""
    monkeypatch.setattr(send_module, "_MEMO_MAX", 3)
    async with send_harness(tmp_path) as h:
        processor = h.table.get(RequestCode.SEND_MESSAGE).__self__  # type: ignore[union-attr]
        assert isinstance(processor, send_module.SendProcessor)
        for i in range(7):
            bad = await h.invoke(send_request(topic="bad topic!"))
            assert bad.code == ResponseCode.SYSTEM_ERROR
            forbidden = await h.invoke(send_request(topic="SCHEDULE_TOPIC_XXXX"))
            assert forbidden.code == ResponseCode.NO_PERMISSION
            good = await h.invoke(send_request(topic=f"NewTopic{i}"))
            assert good.code == ResponseCode.SUCCESS, good.remark
            assert "bad topic!" not in processor._sendable_names
            assert len(processor._sendable_names) <= 3
            assert len(processor._hosts) <= 3


async def test_oversize_body_is_illegal(tmp_path: Path) -> None:
    async with send_harness(tmp_path, store={"max_message_size": 1024}) as h:
        reply = await h.invoke(send_request(b"x" * 2048))
        assert reply.code == ResponseCode.MESSAGE_ILLEGAL
        assert reply.remark is not None and "1024B" in reply.remark
        ok = await h.invoke(send_request(b"small"))
        assert ok.code == ResponseCode.SUCCESS


async def test_slave_refuses(tmp_path: Path) -> None:
    async with send_harness(tmp_path, store={"broker_role": BrokerRole.SLAVE}) as h:
        reply = await h.invoke(send_request())
        assert reply.code == ResponseCode.SERVICE_NOT_AVAILABLE
        assert "msgId" not in reply.ext_fields


async def _retry(h: SendHarness, reconsume: int, **kw: Any) -> RemotingCommand:
    return await h.invoke(
        send_request(topic="%RETRY%CID_x", reconsume_times=reconsume, queue_id=0, **kw)
    )


async def test_retry_topic_group_must_exist(tmp_path: Path) -> None:
    async with send_harness(tmp_path, broker={"auto_create_subscription_group": False}) as h:
        reply = await _retry(h, 0)
        assert reply.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


async def test_retry_to_dlq(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        h.ctx.groups.update_subscription_group_config(
            SubscriptionGroupConfig("CID_x", retry_max_times=3)
        )
        under = await _retry(h, 2)
        assert under.code == ResponseCode.SUCCESS
        assert _stored(h.ctx.store, under).topic == "%RETRY%CID_x"
        over = await _retry(h, 3)
        assert over.code == ResponseCode.SUCCESS
        assert _stored(h.ctx.store, over).topic == "%DLQ%CID_x"
        dlq = h.ctx.topics.select_topic_config("%DLQ%CID_x")
        assert dlq is not None and dlq.write_queue_nums == 1 and dlq.perm == 6
        # version >= V3_4_9: the header's maxReconsumeTimes wins.
        header_max = await _retry(h, 3, max_reconsume_times=5)
        assert _stored(h.ctx.store, header_max).topic == "%RETRY%CID_x"


async def test_unwritable_broker_refuses_only_order_topics(tmp_path: Path) -> None:
    async with send_harness(tmp_path, broker={"broker_permission": 4}) as h:
        assert (await h.invoke(send_request())).code == ResponseCode.SUCCESS
        h.ctx.topics.update_order_topic_config([TOPIC])
        reply = await h.invoke(send_request())
        assert reply.code == ResponseCode.NO_PERMISSION
        assert reply.remark is not None and reply.remark.endswith("sending message is forbidden")


async def test_compressed_cpp_body_is_stored_as_sent(tmp_path: Path) -> None:
    lines = _client_frames("cpp_client.jsonl", (RequestCode.SEND_MESSAGE,))
    compressed = [line for line in lines if int(line["header"]["extFields"]["sysFlag"]) & 1]
    assert compressed
    async with send_harness(tmp_path) as h:
        replies, _ = await h.replay([bytes.fromhex(compressed[0]["frame_hex"])])
        assert replies[0].code == ResponseCode.SUCCESS
        msg = _stored(h.ctx.store, replies[0])
        assert msg.sys_flag & 1


async def test_batch_decided_by_header_not_code(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        single = send_request(b"plain", code=RequestCode.SEND_BATCH_MESSAGE)
        reply = await h.invoke(single)
        assert reply.code == ResponseCode.SUCCESS
        assert _stored(h.ctx.store, reply).body == b"plain"


async def test_value_holding_name_separator_is_stored_as_sent(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        reply = await h.invoke(send_request(properties="A\x01b\x01c\x02TAGS\x01T\x02"))
        assert reply.code == ResponseCode.SUCCESS
        assert _stored(h.ctx.store, reply).properties["A"] == "b\x01c"


async def test_retry_topic_created_even_with_auto_create_off(tmp_path: Path) -> None:
    async with send_harness(tmp_path, broker={"auto_create_topic_enable": False}) as h:
        reply = await _retry(h, 0)
        assert reply.code == ResponseCode.SUCCESS
        config = h.ctx.topics.select_topic_config("%RETRY%CID_x")
        assert config is not None and config.write_queue_nums == 1 and config.perm == 6


async def test_transaction_message_rejected_when_configured(tmp_path: Path) -> None:
    props = "TRAN_MSG\x01true\x02TAGS\x01T\x02"
    async with send_harness(tmp_path, broker={"reject_transaction_message": True}) as h:
        reply = await h.invoke(send_request(properties=props))
        assert reply.code == ResponseCode.NO_PERMISSION
        assert reply.remark is not None
        assert reply.remark.endswith("sending transaction message is forbidden")


async def test_refusals_carry_region_and_bad_header_keeps_serving(tmp_path: Path) -> None:
    async with send_harness(tmp_path, broker={"auto_create_topic_enable": False}) as h:
        refused = await h.invoke(send_request(topic="NewTopic"))
        assert refused.code == ResponseCode.TOPIC_NOT_EXIST
        assert refused.ext_fields["MSG_REGION"] == "DefaultRegion"
        _assert_string_fields(refused)
        bad = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": TOPIC}, b"x")
        reply = await h.invoke(bad)
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert (await h.invoke(send_request())).code == ResponseCode.SUCCESS
