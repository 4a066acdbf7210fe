"""SYNC_MASTER over a real HA socket: PUT_OK only after a slave acked, and the failures.

A put's status comes from ``GroupTransfer`` through the store's replica seam:
PUT_OK once a slave acknowledged its end offset, FLUSH_SLAVE_TIMEOUT when a
connected slave does not ack within ``slaveTimeout``, SLAVE_NOT_AVAILABLE with no
slave or one too far behind. Slow slaves are bare sockets that never ack.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.broker.ha.service import HAService
from aiorocketmq.common.message import Message
from aiorocketmq.common.message_codec import encode_batch
from aiorocketmq.store.config import BrokerRole
from aiorocketmq.store.inner_message import MessageExtBatch
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import PutMessageStatus
from tests.support.wait import wait_until
from tests.unit.ha.ha_support import (
    HAPair,
    master_config,
    queue_bodies,
    raw_slave,
    slave_config,
    start_master,
    start_slave,
)
from tests.unit.store.helpers import BORN_HOST, STORE_HOST
from tests.unit.store.store_support import TOPIC, inner

S = PutMessageStatus
SYNC = BrokerRole.SYNC_MASTER


@pytest.fixture
async def sync_pair(tmp_path: Path) -> AsyncIterator[HAPair]:
    master, master_ha = await start_master(master_config(tmp_path, SYNC, slave_timeout=5000))
    slave, slave_ha = await start_slave(slave_config(tmp_path), master_ha.ha_port)
    pair = HAPair(master, master_ha, slave, slave_ha)
    await pair.slave_requested()
    yield pair
    await pair.close()


@pytest.fixture
async def lone_master(tmp_path: Path) -> AsyncIterator[tuple[MessageStore, HAService]]:
    config = master_config(tmp_path, SYNC, slave_timeout=300, ha_housekeeping_interval=60_000)
    master, master_ha = await start_master(config)
    yield master, master_ha
    await master_ha.shutdown()
    await master.shutdown()


async def test_put_returns_ok_only_after_the_slave_has_it(sync_pair: HAPair) -> None:
    server = sync_pair.master_ha.server
    assert server is not None
    for i in range(20):
        result = await sync_pair.master.put_message(inner(b"m%d" % i))
        end = result.physical_offset + result.wrote_bytes
        assert result.status is S.PUT_OK
        # By the time the put answers, the slave has the bytes and said so.
        assert server.push2slave_max_offset >= end
        assert sync_pair.slave.max_phy_offset >= end


async def test_concurrent_puts_are_released_together_by_acks(sync_pair: HAPair) -> None:
    server = sync_pair.master_ha.server
    assert server is not None
    results = await asyncio.gather(
        *(sync_pair.master.put_message(inner(b"c%d" % i, queue_id=i % 4)) for i in range(200))
    )
    assert [r.status for r in results] == [S.PUT_OK] * 200
    assert server.push2slave_max_offset >= max(r.physical_offset + r.wrote_bytes for r in results)
    assert server.group_transfer.pending == 0
    await sync_pair.caught_up()
    assert await sync_pair.slave.dispatcher.wait_dispatched(sync_pair.slave.max_phy_offset)
    counts = [len(await queue_bodies(sync_pair.slave, queue_id=q)) for q in range(4)]
    assert sum(counts) == 200


async def test_batch_put_waits_for_the_slave_too(sync_pair: HAPair) -> None:
    body = encode_batch([Message(topic=TOPIC, body=b"b%d" % i) for i in range(10)])
    batch = MessageExtBatch(
        topic=TOPIC, queue_id=0, body=body, born_host=BORN_HOST, store_host=STORE_HOST
    )
    result = await sync_pair.master.put_messages(batch)
    assert result.status is S.PUT_OK and result.message_count == 10
    assert sync_pair.slave.max_phy_offset >= result.physical_offset + result.wrote_bytes


async def test_no_slave_gives_slave_not_available(
    lone_master: tuple[MessageStore, HAService],
) -> None:
    master, _ = lone_master
    result = await master.put_message(inner(b"x"))
    # The message is stored all the same; only the promise could not be kept.
    assert result.status is S.SLAVE_NOT_AVAILABLE
    assert master.max_phy_offset == result.physical_offset + result.wrote_bytes


async def test_silent_slave_gives_flush_slave_timeout(
    lone_master: tuple[MessageStore, HAService],
) -> None:
    master, master_ha = lone_master
    server = master_ha.server
    assert server is not None
    reader, writer = await raw_slave(server.port, report=0)
    try:
        await wait_until(lambda: server.connections and server.connections[0].request_offset == 0)
        loop = asyncio.get_running_loop()
        started = loop.time()
        results = await asyncio.gather(*(master.put_message(inner(b"t%d" % i)) for i in range(5)))
        elapsed = loop.time() - started
        assert [r.status for r in results] == [S.FLUSH_SLAVE_TIMEOUT] * 5
        assert 0.29 <= elapsed < 3.0  # slaveTimeout = 300 ms, one timer for all five
        assert server.group_transfer.pending == 0
    finally:
        writer.close()
        del reader


async def test_stopped_slave_gives_timeout_then_not_available(tmp_path: Path) -> None:
    config = master_config(tmp_path, SYNC, slave_timeout=300)
    master, master_ha = await start_master(config)
    slave, slave_ha = await start_slave(slave_config(tmp_path), master_ha.ha_port)
    pair = HAPair(master, master_ha, slave, slave_ha)
    server = master_ha.server
    assert server is not None
    try:
        await pair.slave_requested()
        assert (await master.put_message(inner(b"a"))).status is S.PUT_OK
        await slave_ha.shutdown()
        await wait_until(lambda: server.connection_count == 0, what="the master to notice")
        assert (await master.put_message(inner(b"b"))).status is S.SLAVE_NOT_AVAILABLE
    finally:
        await pair.close()


async def test_slave_too_far_behind_is_not_available(tmp_path: Path) -> None:
    config = master_config(tmp_path, SYNC, slave_timeout=300, ha_slave_fallbehind_max=4096)
    master, master_ha = await start_master(config)
    server = master_ha.server
    assert server is not None
    try:
        reader, writer = await raw_slave(server.port, report=0)
        await wait_until(lambda: server.connections and server.connections[0].request_offset == 0)
        # within 4 KiB of the ack (0): the slave counts, but never acks
        first = await master.put_message(inner(b"x" * 1000))
        assert first.status is S.FLUSH_SLAVE_TIMEOUT
        for _ in range(4):
            await master.put_message(inner(b"x" * 1000))
        # now more than 4 KiB past what the slave acknowledged
        late = await master.put_message(inner(b"x" * 1000))
        assert late.status is S.SLAVE_NOT_AVAILABLE
        writer.close()
        del reader
    finally:
        await master_ha.shutdown()
        await master.shutdown()


async def test_shutdown_releases_waiting_puts(lone_master: tuple[MessageStore, HAService]) -> None:
    master, master_ha = lone_master
    server = master_ha.server
    assert server is not None
    reader, writer = await raw_slave(server.port, report=0)
    try:
        await wait_until(lambda: server.connections and server.connections[0].request_offset == 0)
        put = asyncio.create_task(master.put_message(inner(b"w")))
        await wait_until(lambda: server.group_transfer.pending == 1)
        await master_ha.shutdown()
        assert (await put).status is S.FLUSH_SLAVE_TIMEOUT
    finally:
        writer.close()
        del reader
