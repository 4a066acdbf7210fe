"""Builders the HA component tests share: a master and a slave over a real HA socket.

Owns: ``HAPair`` (two real MessageStores in ``tmp_path`` with their HAServices on
127.0.0.1, the master on a free port), readers of CommitLog files and queue
contents, and ``raw_slave`` (a bare socket speaking the slave's side of the
protocol, for silent or misbehaving slaves).

Must not: sleep, or hide what a test checks: everything is a real store, file
and socket.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiorocketmq.broker.ha.service import HAService
from aiorocketmq.store.config import BrokerRole, MessageStoreConfig
from aiorocketmq.store.message_store import MessageStore
from tests.support.wait import wait_until
from tests.unit.store.store_support import TOPIC, inner, open_store, records, store_config

BODY_1K = bytes(range(256)) * 4

#: Fast HA timing for tests: a heartbeat every 50 ms, housekeeping after 2 s.
HA_FAST: dict[str, Any] = {
    "ha_listen_port": 0,
    "ha_send_heartbeat_interval": 50,
    "ha_housekeeping_interval": 2000,
    "ha_transfer_batch_size": 8 * 1024,
}


def master_config(
    root: Path, role: BrokerRole = BrokerRole.ASYNC_MASTER, **kw: Any
) -> MessageStoreConfig:
    """A master store config on small files with fast HA timing."""
    return store_config(root / "master", broker_role=role, **{**HA_FAST, **kw})


def slave_config(root: Path, **kw: Any) -> MessageStoreConfig:
    """A SLAVE store config on small files with fast HA timing."""
    return store_config(root / "slave", broker_role=BrokerRole.SLAVE, **{**HA_FAST, **kw})


async def start_master(
    config: MessageStoreConfig, store: MessageStore | None = None, port: int = 0
) -> tuple[MessageStore, HAService]:
    """A started master store (``store`` or a new one) and its HAService on 127.0.0.1."""
    if store is None:
        store = await open_store(config)
    ha = HAService(config, host="127.0.0.1", port=port)
    ha.install(store)
    await ha.start()
    return store, ha


async def start_slave(
    config: MessageStoreConfig, master_port: int | None
) -> tuple[MessageStore, HAService]:
    """A started slave store and its HAService pointed at 127.0.0.1:``master_port``."""
    store = await open_store(config)
    ha = HAService(config, backoff_s=0.02, backoff_max_s=0.2)
    ha.install(store)
    if master_port is not None:
        ha.update_master_address(f"127.0.0.1:{master_port}")
    await ha.start()
    return store, ha


@dataclass
class HAPair:
    """A running master and slave; ``close()`` stops all four services."""

    master: MessageStore
    master_ha: HAService
    slave: MessageStore
    slave_ha: HAService

    @property
    def port(self) -> int:
        port = self.master_ha.ha_port
        assert port is not None
        return port

    async def slave_requested(self) -> None:
        """Wait until the master has the slave's first report (its transfer start)."""
        server = self.master_ha.server
        assert server is not None
        await wait_until(
            lambda: len(server.connections) == 1 and server.connections[0].request_offset >= 0,
            what="the slave's first report",
        )

    async def caught_up(self, limit_s: float = 10.0) -> None:
        """Wait until the slave's CommitLog ends where the master's does."""
        await wait_until(
            lambda: self.slave.max_phy_offset == self.master.max_phy_offset,
            timeout=limit_s, what="the slave to catch up",
            describe=lambda: (self.master.max_phy_offset, self.slave.max_phy_offset),
        )  # fmt: skip

    async def close(self) -> None:
        await self.slave_ha.shutdown()
        await self.master_ha.shutdown()
        await self.slave.shutdown()
        await self.master.shutdown()


async def put_many(store: MessageStore, count: int, *, queue_id: int = 0) -> list[int]:
    """Put ``count`` 1 KiB messages (body prefixed by its number); their end offsets."""
    ends = []
    for i in range(count):
        result = await store.put_message(inner(i.to_bytes(4, "big") + BODY_1K, queue_id=queue_id))
        assert result.ok, result
        ends.append(result.physical_offset + result.wrote_bytes)
    return ends


def commit_log_files(store: MessageStore) -> dict[str, bytes]:
    """The CommitLog files of ``store`` holding data, by name, read from disk.

    Files the allocator prepared but the CommitLog has not taken, and files that
    start at the max offset (still empty), are left out: only one side may have
    created its next file yet.
    """
    end = store.max_phy_offset
    files = [f.path for f in store.commit_log.queue.files if f.file_from_offset < end]
    return {path.name: path.read_bytes() for path in files}


async def queue_bodies(
    store: MessageStore, topic: str = TOPIC, queue_id: int = 0
) -> dict[int, bytes]:
    """queue offset -> body of every message of a queue, pulled with ``get_message``.

    Waits first until the store's dispatcher has caught up with its CommitLog.
    """
    assert await store.dispatcher.wait_dispatched(store.max_phy_offset)
    found: dict[int, bytes] = {}
    offset = store.get_min_offset_in_queue(topic, queue_id)
    while offset < store.get_max_offset_in_queue(topic, queue_id):
        result = store.get_message("g", topic, queue_id, offset, 32)
        assert result is not None and result.messages, (offset, result)
        with result:
            for queue_offset, record in zip(
                result.message_queue_offsets, records(result), strict=True
            ):
                found[queue_offset] = bytes(record.body)
        offset = result.next_begin_offset
    return found


async def raw_slave(
    port: int, report: int | None
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A bare TCP connection to the master's HA port, optionally sending one report."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if report is not None:
        writer.write(report.to_bytes(8, "big"))
        await writer.drain()
    return reader, writer


class CuttingProxy:
    """A TCP proxy to the master's HA port that cuts its first connection mid-stream.

    The first connection is closed after ``cut_after`` bytes went master -> slave
    (mid-frame, when not a multiple of a frame); later connections pass through.
    """

    def __init__(self, target_port: int, cut_after: int) -> None:
        self.target_port = target_port
        self.cut_after = cut_after
        self.connections = 0
        self.cuts = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def close(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        limit = self.cut_after if self.connections == 1 else None
        task = asyncio.get_running_loop().create_task(self._pipe(reader, writer, limit))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int | None
    ) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def copy(
            src: asyncio.StreamReader, dst: asyncio.StreamWriter, cap: int | None
        ) -> None:
            sent = 0
            while data := await src.read(4096):
                if cap is not None and sent + len(data) >= cap:
                    dst.write(data[: cap - sent])
                    await dst.drain()
                    self.cuts += 1
                    return
                dst.write(data)
                sent += len(data)
                await dst.drain()

        tasks = [
            asyncio.create_task(copy(reader, up_writer, None)),
            asyncio.create_task(copy(up_reader, writer, limit)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            writer.close()
            up_writer.close()
