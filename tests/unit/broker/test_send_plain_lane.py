"""The send processor's plain lane against its general path, on a real store and server.

The same SEND_MESSAGE_V2 requests go to two brokers: one as built (plain sends take
``SendProcessor._send_plain``), one with the lane turned off. Replies and stored
records must be the same; and the first broker must have sent exactly the plain
requests down the lane, on both readers (C twin and reference).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.broker import plain_send
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.kernels import IMPLEMENTATIONS, use_send_kernel
from tests.unit.broker.processor_support import TOPIC, send_harness, send_request
from tests.unit.store.store_support import dispatched

MULTI = "MultiTagTopic"
V2 = RequestCode.SEND_MESSAGE_V2

#: (request, whether the lane takes it once its topic passed the static checks)
Case = tuple[RemotingCommand, bool]


def _cases() -> list[Case]:
    def v2(body: bytes = b"plain", **kw: Any) -> RemotingCommand:
        return send_request(body, code=V2, **kw)

    return [
        (v2(), True),
        (v2(b"k" * 2048, queue_id=3, properties="KEYS\x01a b\x02WAIT\x01false"), True),
        (v2(b"m", topic=MULTI, properties="TAGS\x01x||y"), True),
        (v2(b"none", properties=None), True),
        (v2(b"flags", sys_flag=8, flag=9, reconsume_times=2), True),
        (v2(b"q", queue_id=4), False),  # no such queue: refused by the general path
        (v2(b"unknown", topic="NoSuchTopic"), False),  # created from TBW102
        (v2(b"unknown again", topic="NoSuchTopic"), True),
        (v2(b"retry", topic="%RETRY%CID_test"), False),  # created too
        (v2(b"retry again", topic="%RETRY%CID_test"), False),  # the retry rules apply
        (v2(b"delay", properties="DELAY\x012"), False),
        (v2(b"half", properties="TRAN_MSG\x01true"), False),
        (v2(b"timer", properties="TIMER_DELAY_SEC\x013"), False),
        (v2(b"twice", properties="TAGS\x01a\x02TAGS\x01b"), None),  # the C twin declines
        (send_request(b"v1", queue_id=2), True),  # SEND_MESSAGE: the long header
        (send_request(b"v1 delay", properties="DELAY\x012"), False),
        (send_request(b"v1 none", properties=None, sys_flag=8, reconsume_times=1), True),
    ]


async def _run(tmp_path: Path, lane: bool) -> tuple[list[Any], list[Any], list[bool]]:
    took: list[bool] = []
    async with send_harness(tmp_path) as h:
        h.ctx.topics.update_topic_config(TopicConfig(MULTI, 4, 4, topic_filter_type="MULTI_TAG"))
        processor = h.table.get(V2).__self__
        assert isinstance(processor, SendProcessor)
        general = processor._send

        def counted(*args: Any) -> Any:
            took[-1] = False
            return general(*args)

        processor._send = counted  # type: ignore[method-assign]
        if not lane:
            processor._send_plain = lambda *args: None  # type: ignore[method-assign]
        firsts = [send_request(b"first", topic=topic, code=V2) for topic in (TOPIC, MULTI)]
        replies = []
        for request in [*firsts, *(request for request, _ in _cases())]:
            took.append(True)
            reply = await h.invoke(request)
            # A refusal may name the sender's address: another port on each broker.
            remark = re.sub(r"127\.0\.0\.1:\d+", "<producer>", reply.remark or "")
            replies.append((reply.code, remark, reply.ext_fields))
        await dispatched(h.ctx.store)
        # Each topic's first send passes the static checks on the general path.
        assert took[:2] == [False, False]
        return replies, _records(h.ctx.store.commit_log), took[2:]


def _records(log: Any) -> list[tuple[Any, ...]]:
    """Every record's fields but the store time and the sender's port (two connections)."""
    out = []
    for mapped in log.queue.files:
        pos = 0
        while pos < mapped.wrote_position:
            r = decode_record(mapped.buffer, pos)
            out.append((r.topic, r.queue_id, r.flag, r.queue_offset, r.physical_offset,
                        r.sys_flag, r.born_timestamp, r.born_host[0], r.store_host,
                        r.reconsume_times, r.body, r.properties))  # fmt: skip
            pos += r.total_size
    return out


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_the_lane_replies_and_stores_as_the_general_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, implementation: str
) -> None:
    use_send_kernel(implementation, monkeypatch)
    kernel = plain_send._KERNEL
    fast, fast_records, took = await _run(tmp_path / "lane", lane=True)
    ref, ref_records, _ = await _run(tmp_path / "general", lane=False)
    assert fast == ref
    assert fast_records == ref_records
    stored = sum(code == ResponseCode.SUCCESS for code, _, _ in fast)
    assert stored >= 7 and len(fast_records) == stored  # each stored send, firsts included
    expected = [kernel is None if plain is None else plain for _, plain in _cases()]
    assert took == expected


async def _through_a_full_disk(tmp_path: Path, lane: bool) -> tuple[list[Any], list[Any]]:
    """A send, one while the disk is full, one after: codes, fields and records."""
    async with send_harness(tmp_path) as h:
        if not lane:
            processor = h.table.get(V2).__self__
            processor._send_plain = lambda *args: None  # type: ignore[attr-defined]
        replies = [await h.invoke(send_request(b"first", code=V2))]
        h.ctx.store.flags.get_and_make_disk_full()
        replies.append(await h.invoke(send_request(b"refused", code=V2)))
        h.ctx.store.flags.get_and_make_disk_ok()
        replies.append(await h.invoke(send_request(b"stored", code=V2)))
        await dispatched(h.ctx.store)
        # The remark quotes the disks' measured shares: its words, not its figures.
        answers = [(r.code, (r.remark or "").split(":")[0], r.ext_fields) for r in replies]
        return answers, _records(h.ctx.store.commit_log)


async def test_a_store_that_refuses_puts_answers_the_lane_as_the_general_path(
    tmp_path: Path,
) -> None:
    fast, fast_records = await _through_a_full_disk(tmp_path / "lane", lane=True)
    ref, ref_records = await _through_a_full_disk(tmp_path / "general", lane=False)
    assert fast == ref and fast_records == ref_records
    codes = [code for code, _, _ in fast]
    assert codes == [ResponseCode.SUCCESS, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SUCCESS]
    assert [body for *_, body, _ in fast_records] == [b"first", b"stored"]
