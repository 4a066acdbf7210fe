"""ConsumerManageProcessor on a real store and server: captured offset frames and requests."""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.vectors import load_jsonl
from tests.unit.broker.processor_support import TOPIC, send_harness, send_request
from tests.unit.store.store_support import dispatched

GROUP = "CID_alions"


def _frames(name: str, code: int) -> list[bytes]:
    return [
        bytes.fromhex(line["frame_hex"])
        for line in load_jsonl(name)
        if line["origin"] == "client" and line["code"] == code
    ]


def _request(code: int, **fields: object) -> RemotingCommand:
    return RemotingCommand.request(code, {k: str(v) for k, v in fields.items()})


async def test_new_group_query_answers_zero(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        replies, _ = await h.replay(_frames("cpp_client.jsonl", RequestCode.QUERY_CONSUMER_OFFSET))
        assert replies
        for reply in replies:
            assert reply.code == ResponseCode.SUCCESS
            assert reply.ext_fields["offset"] == "0"


async def test_alions_commits_with_negative_ignored(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        frames = _frames("alions_client.jsonl", RequestCode.UPDATE_CONSUMER_OFFSET)
        replies, _ = await h.replay(frames)
        assert {r.code for r in replies} == {ResponseCode.SUCCESS}
        offsets = h.ctx.offsets
        assert offsets.query_offset(GROUP, "%RETRY%" + GROUP, 0) == -1
        assert offsets.query_offset(GROUP, TOPIC, 0) >= 1
        query = _request(
            RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup=GROUP, topic=TOPIC, queueId=1
        )
        reply = await h.invoke(query)
        assert reply.code == ResponseCode.SUCCESS
        assert reply.ext_fields["offset"] == str(offsets.query_offset(GROUP, TOPIC, 1))


async def test_query_not_found_when_queue_moved_on(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        h.ctx.store.get_min_offset_in_queue = lambda topic, queue_id: 5  # type: ignore[method-assign]
        query = _request(
            RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup="CID_new", topic=TOPIC, queueId=0
        )
        reply = await h.invoke(query)
        assert reply.code == ResponseCode.QUERY_NOT_FOUND
        assert reply.remark == "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"


async def test_store_offset_queries(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        for _ in range(3):
            assert (await h.invoke(send_request(queue_id=2))).code == ResponseCode.SUCCESS
        await dispatched(h.ctx.store)
        q = {"topic": TOPIC, "queueId": 2}
        max_reply = await h.invoke(_request(RequestCode.GET_MAX_OFFSET, **q))
        assert (max_reply.code, max_reply.ext_fields["offset"]) == (ResponseCode.SUCCESS, "3")
        min_reply = await h.invoke(_request(RequestCode.GET_MIN_OFFSET, **q))
        assert min_reply.ext_fields["offset"] == "0"
        earliest = await h.invoke(_request(RequestCode.GET_EARLIEST_MSG_STORETIME, **q))
        assert earliest.code == ResponseCode.SUCCESS
        stamp = int(earliest.ext_fields["timestamp"])
        assert stamp > 0
        search = await h.invoke(
            _request(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=stamp, **q)
        )
        assert search.code == ResponseCode.SUCCESS
        expected = h.ctx.store.get_offset_in_queue_by_time(TOPIC, 2, stamp)
        assert search.ext_fields["offset"] == str(expected)
        assert 0 <= expected <= 2
        empty = await h.invoke(_request(RequestCode.GET_MAX_OFFSET, topic=TOPIC, queueId=3))
        assert empty.ext_fields["offset"] == "0"


async def test_missing_header_field_is_system_error(tmp_path: Path) -> None:
    async with send_harness(tmp_path) as h:
        reply = await h.invoke(_request(RequestCode.GET_MAX_OFFSET, topic=TOPIC))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        still = await h.invoke(_request(RequestCode.GET_MIN_OFFSET, topic=TOPIC, queueId=0))
        assert still.code == ResponseCode.SUCCESS
