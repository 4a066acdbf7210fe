"""QUERY_MESSAGE and VIEW_MESSAGE_BY_ID on a real store and a real server.

Messages go in through SEND_MESSAGE (so KEYS and UNIQ_KEY are indexed by the
real dispatcher), and come back through the processors over a socket.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.query import UNIQUE_MSG_QUERY_FLAG, QueryProcessor
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.common.message_codec import decode_pull_body, decode_record
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.remoting.broker_admin_headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from aiorocketmq.remoting.broker_headers import SendMessageResponseHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.store import page_ops
from tests.support.page_cache import drop_from_page_cache
from tests.unit.broker.broker_support import TOPIC, Harness, harness
from tests.unit.broker.processor_support import send_request
from tests.unit.store.store_support import dispatched


def _register(ctx: BrokerContext, table: ProcessorTable) -> None:
    SendProcessor(ctx).register(table)
    QueryProcessor(ctx).register(table)


@contextlib.asynccontextmanager
async def broker(tmp_path: Path, **kwargs: Any) -> AsyncIterator[Harness]:
    async with harness(tmp_path, extra=_register, **kwargs) as h:
        yield h


async def send(h: Harness, body: bytes, **props: str) -> SendMessageResponseHeader:
    properties = "".join(f"{k}\x01{v}\x02" for k, v in props.items())
    reply = await h.invoke(send_request(body, properties=properties, queue_id=len(body) % 4))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return SendMessageResponseHeader.from_ext_fields(reply.ext_fields)


def query(
    key: str, begin: int, end: int, *, max_num: int = 64, unique: bool = False
) -> RemotingCommand:
    fields = QueryMessageRequestHeader(TOPIC, key, max_num, begin, end).to_ext_fields()
    if unique:
        fields[UNIQUE_MSG_QUERY_FLAG] = "true"
    return RemotingCommand.request(RequestCode.QUERY_MESSAGE, fields)


def view(offset: int) -> RemotingCommand:
    fields = ViewMessageRequestHeader(offset).to_ext_fields()
    return RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, fields)


async def test_key_query_finds_every_message_with_the_key_in_range(tmp_path: Path) -> None:
    async with broker(tmp_path) as h:
        before_ms = int(time.time() * 1000)
        with_key = {f"k-{i}".encode() for i in range(30)}
        for body in sorted(with_key):
            await send(h, body, KEYS="order-1 shared")
        for i in range(10):
            last = await send(h, f"other-{i}".encode(), KEYS="order-2 shared")
        await dispatched(h.ctx.store)
        after_ms = int(time.time() * 1000)

        reply = await h.invoke(query("order-1", before_ms - 1000, after_ms + 1000))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        records = decode_pull_body(reply.body, check_crc=True)
        assert {r.body for r in records} == with_key
        assert len(records) == len(with_key)
        for record in records:
            assert record.topic == TOPIC
            assert "order-1" in record.properties[MessageConst.PROPERTY_KEYS].split(" ")
        header = QueryMessageResponseHeader.from_ext_fields(reply.ext_fields)
        # The newest IndexFile last indexed the last message sent.
        assert header.index_last_update_phyoffset == decode_offset_msg_id(last.msg_id)[2]
        assert before_ms - 1000 <= header.index_last_update_timestamp <= after_ms + 1000

        # Both sets share the word "shared"; maxNum caps what comes back.
        reply = await h.invoke(query("shared", before_ms - 1000, after_ms + 1000, max_num=64))
        assert len(decode_pull_body(reply.body)) == 40
        reply = await h.invoke(query("shared", before_ms - 1000, after_ms + 1000, max_num=7))
        assert len(decode_pull_body(reply.body)) == 7


async def test_key_query_outside_the_time_range_finds_nothing(tmp_path: Path) -> None:
    async with broker(tmp_path) as h:
        before_ms = int(time.time() * 1000)
        await send(h, b"a", KEYS="order-1")
        await dispatched(h.ctx.store)
        after_ms = int(time.time() * 1000)
        for begin, end in ((0, before_ms - 5000), (after_ms + 5000, after_ms + 60_000)):
            reply = await h.invoke(query("order-1", begin, end))
            assert reply.code == ResponseCode.QUERY_NOT_FOUND
            assert reply.remark == "can not find message, maybe time range not correct"
            assert reply.body == b""
            assert "indexLastUpdatePhyoffset" in reply.ext_fields
        reply = await h.invoke(query("no-such-key", 0, after_ms + 1000))
        assert reply.code == ResponseCode.QUERY_NOT_FOUND


async def test_view_by_offset_returns_the_exact_record_bytes(tmp_path: Path) -> None:
    async with broker(tmp_path) as h:
        await send(h, b"first")
        sent = await send(h, b"second message", KEYS="x")
        _ip, _port, offset = decode_offset_msg_id(sent.msg_id)
        await dispatched(h.ctx.store)
        reply = await h.invoke(view(offset))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        record = decode_record(reply.body)
        assert record.total_size == len(reply.body)
        assert record.physical_offset == offset
        assert record.body == b"second message"
        # The same bytes as in the CommitLog file on disk (the store maps it shared).
        cfg = h.ctx.store.config
        file_size = cfg.mapped_file_size_commit_log
        start = offset - offset % file_size
        path = cfg.commit_log_dir / f"{start:020d}"
        with path.open("rb") as f:
            f.seek(offset - start)
            assert f.read(len(reply.body)) == reply.body


async def test_view_of_a_record_out_of_memory_reads_it_in_a_thread_first(
    tmp_path: Path,
) -> None:
    if not page_ops.populate_supported():
        pytest.skip("no MADV_POPULATE_READ here: a view reads as before")
    # 64 KiB CommitLog files: a restart's recovery reads the last three back, and the
    # first four stay out of memory (a read brings in its whole file: readahead).
    store = {"mapped_file_size_commit_log": 64 * 1024}
    async with broker(tmp_path, store=store) as h:
        sent = [
            await send(h, bytes([i % 251]) * 1024, **({"KEYS": "k-old"} if i == 100 else {}))
            for i in range(400)
        ]
        await dispatched(h.ctx.store)
    os.sync()
    drop_from_page_cache(tmp_path)
    async with broker(tmp_path, store=store) as h:
        offset = decode_offset_msg_id(sent[10].msg_id)[2]
        for _ in range(2):
            reply = await h.invoke(view(offset))
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            assert decode_record(reply.body).body == bytes([10]) * 1024
            # Read in the pool the first time; in memory, and not read again, after.
            assert h.ctx.store.read_ahead.cold_reads == 1
        # A search by key: the records the index names, read in one hop.
        reply = await h.invoke(query("k-old", 0, int(time.time() * 1000) + 1000))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        assert {r.body for r in decode_pull_body(reply.body)} == {bytes([100]) * 1024}
        assert h.ctx.store.read_ahead.cold_reads == 2


async def test_view_by_bad_offset_is_a_system_error(tmp_path: Path) -> None:
    async with broker(tmp_path) as h:
        sent = await send(h, b"only")
        _ip, _port, offset = decode_offset_msg_id(sent.msg_id)
        for bad in (offset + 1, 10**9, -5):
            reply = await h.invoke(view(bad))
            assert reply.code == ResponseCode.SYSTEM_ERROR
            assert reply.remark == f"can not find message by the offset, {bad}"
        reply = await h.invoke(RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {}))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert reply.remark == "the custom field <offset> is null"


async def test_unique_key_query_uses_the_default_query_max_num(tmp_path: Path) -> None:
    async with broker(tmp_path, store={"default_query_max_num": 5}) as h:
        before_ms = int(time.time() * 1000)
        uniq = "7F0000010001000000000000000A0001"
        for i in range(9):
            await send(h, f"u{i}".encode(), UNIQ_KEY=uniq)
        await send(h, b"another", UNIQ_KEY="7F0000010001000000000000000A0002")
        await dispatched(h.ctx.store)
        window = (before_ms - 1000, int(time.time() * 1000) + 1000)

        # The flag replaces maxNum (smaller or larger) by defaultQueryMaxNum.
        for asked in (1, 50):
            reply = await h.invoke(query(uniq, *window, max_num=asked, unique=True))
            assert reply.code == ResponseCode.SUCCESS
            records = decode_pull_body(reply.body)
            assert len(records) == 5
            assert {
                r.properties[MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for r in records
            } == {uniq}
        reply = await h.invoke(query(uniq, *window, max_num=50))
        assert len(decode_pull_body(reply.body)) == 9


async def test_query_with_a_bad_header_is_a_system_error(tmp_path: Path) -> None:
    async with broker(tmp_path) as h:
        fields = QueryMessageRequestHeader(TOPIC, "k", 32, 0, 1).to_ext_fields()
        fields["maxNum"] = "many"
        reply = await h.invoke(RemotingCommand.request(RequestCode.QUERY_MESSAGE, fields))
        assert reply.code == ResponseCode.SYSTEM_ERROR
        assert "maxNum" in (reply.remark or "")
        # The server keeps serving.
        reply = await h.invoke(query("k", 0, 1))
        assert reply.code == ResponseCode.QUERY_NOT_FOUND
