"""Master and slave over a real HA socket: catch-up, byte identity, reconnects.

Real MessageStores on small CommitLog files (64 KiB) in ``tmp_path``, real
sockets on 127.0.0.1, one process. Every wait is on a condition with a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.broker.ha.codec import HEADER_SIZE, encode_header
from aiorocketmq.store.results import PutMessageStatus
from tests.support.wait import wait_until
from tests.unit.ha.ha_support import (
    BODY_1K,
    CuttingProxy,
    HAPair,
    commit_log_files,
    master_config,
    put_many,
    queue_bodies,
    raw_slave,
    slave_config,
    start_master,
    start_slave,
)
from tests.unit.store.helpers import SMALL_COMMIT_LOG
from tests.unit.store.store_support import inner, open_store


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[HAPair]:
    master, master_ha = await start_master(master_config(tmp_path))
    slave, slave_ha = await start_slave(slave_config(tmp_path), master_ha.ha_port)
    pair = HAPair(master, master_ha, slave, slave_ha)
    yield pair
    await pair.close()


async def test_empty_slave_follows_across_files_byte_identically(pair: HAPair) -> None:
    await pair.slave_requested()
    await put_many(pair.master, 300)
    assert pair.master.max_phy_offset > 4 * SMALL_COMMIT_LOG  # several files rolled
    await pair.caught_up()
    master_files = commit_log_files(pair.master)
    assert len(master_files) >= 5
    # Whole files, BLANK tails and zeros included, are the same bytes.
    assert commit_log_files(pair.slave) == master_files
    # The slave's dispatcher built its queues from the replicated bytes.
    assert await pair.slave.dispatcher.wait_dispatched(pair.slave.max_phy_offset)
    bodies = await queue_bodies(pair.slave)
    assert bodies == await queue_bodies(pair.master)
    assert sorted(bodies) == list(range(300))
    assert bodies[299] == (299).to_bytes(4, "big") + BODY_1K
    # Every slice the transfer read was released: only the owner holds each file.
    files = pair.master.commit_log.queue.files
    await wait_until(
        lambda: [f.ref_count for f in files] == [1] * len(files),
        what="every transferred file released",
        describe=lambda: [f.ref_count for f in files],
    )


async def test_new_slave_starts_at_the_masters_last_file(tmp_path: Path) -> None:
    master, master_ha = await start_master(master_config(tmp_path))
    await put_many(master, 300)
    slave, slave_ha = await start_slave(slave_config(tmp_path), master_ha.ha_port)
    pair = HAPair(master, master_ha, slave, slave_ha)
    try:
        await pair.caught_up()
        last_start = master.max_phy_offset - master.max_phy_offset % SMALL_COMMIT_LOG
        assert slave.min_phy_offset == last_start > 0  # Java's rule for a report of 0
        slave_files = commit_log_files(slave)
        master_files = commit_log_files(master)
        assert list(slave_files) == [f"{last_start:020d}"]
        assert slave_files[f"{last_start:020d}"] == master_files[f"{last_start:020d}"]
        assert await slave.dispatcher.wait_dispatched(slave.max_phy_offset)
        on_slave = await queue_bodies(slave)
        assert on_slave and max(on_slave) == 299 and min(on_slave) > 0
        on_master = await queue_bodies(master)
        assert on_slave == {k: on_master[k] for k in on_slave}
        # and the slave keeps following
        await put_many(master, 5)
        await pair.caught_up()
        assert await slave.dispatcher.wait_dispatched(slave.max_phy_offset)
        assert max(await queue_bodies(slave)) == 304
    finally:
        await pair.close()


async def test_slave_reconnects_after_the_master_restarts(tmp_path: Path) -> None:
    config = master_config(tmp_path)
    master, master_ha = await start_master(config)
    port = master_ha.ha_port
    assert port is not None
    slave, slave_ha = await start_slave(slave_config(tmp_path), port)
    client = slave_ha.client
    assert client is not None
    await put_many(master, 20)
    await wait_until(lambda: slave.max_phy_offset == master.max_phy_offset, timeout=10)
    await master_ha.shutdown()
    await master.shutdown()
    await wait_until(lambda: not client.connected, what="the slave to notice")
    master = await open_store(config)
    master, master_ha = await start_master(config, master, port=port)
    pair = HAPair(master, master_ha, slave, slave_ha)
    try:
        await wait_until(lambda: client.connected, timeout=10, what="the slave to reconnect")
        assert client.reconnects >= 1
        await put_many(master, 100)
        await pair.caught_up()
        assert commit_log_files(slave) == commit_log_files(master)
    finally:
        await pair.close()


async def test_master_heartbeats_an_idle_slave(pair: HAPair) -> None:
    server = pair.master_ha.server
    assert server is not None
    await pair.slave_requested()
    reader, writer = await raw_slave(pair.port, report=0)
    try:
        async with asyncio.timeout(5):
            header = await reader.readexactly(HEADER_SIZE)
        # An empty master: the transfer starts at 0 and a heartbeat says so.
        assert header == encode_header(0, 0)
        assert server.connection_count == 2
    finally:
        writer.close()
    await wait_until(lambda: server.connection_count == 1, what="the raw slave to be dropped")


async def test_master_drops_a_silent_slave_after_housekeeping(tmp_path: Path) -> None:
    master, master_ha = await start_master(master_config(tmp_path, ha_housekeeping_interval=300))
    server = master_ha.server
    assert server is not None
    try:
        reader, writer = await raw_slave(server.port, report=0)
        await wait_until(lambda: server.connection_count == 1)
        # It reads what the master sends but never reports again: dropped.
        async with asyncio.timeout(5):
            while await reader.read(4096):
                pass
        assert server.connection_count == 0
        writer.close()
    finally:
        await master_ha.shutdown()
        await master.shutdown()


async def test_master_drops_a_slave_reporting_beyond_its_offset(pair: HAPair) -> None:
    server = pair.master_ha.server
    assert server is not None
    reader, writer = await raw_slave(pair.port, report=0)
    try:
        writer.write((10**9).to_bytes(8, "big"))
        await writer.drain()
        async with asyncio.timeout(5):
            while await reader.read(4096):
                pass
    finally:
        writer.close()
    await wait_until(lambda: server.connection_count == 1)


async def _fake_master(
    frames_by_connection: list[bytes],
) -> tuple[asyncio.Server, list[int], asyncio.Event]:
    """A master that, per connection, reads the first report then sends given bytes."""
    reports: list[int] = []
    done = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        reports.append(int.from_bytes(await reader.readexactly(8), "big"))
        index = len(reports) - 1
        if index < len(frames_by_connection):
            writer.write(frames_by_connection[index])
            await writer.drain()
        else:
            done.set()
        # Hold the connection until the slave closes it.
        while await reader.read(4096):
            pass
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, reports, done


@pytest.mark.parametrize("bad", ["offset_gap", "offset_behind", "negative_size"])
async def test_bad_master_stream_makes_the_slave_reconnect_untouched(
    tmp_path: Path, bad: str
) -> None:
    source = await open_store(master_config(tmp_path))
    await put_many(source, 3)
    selected = source.get_commit_log_data(0)
    assert selected is not None
    with selected:
        data = bytes(selected.view)
    await source.shutdown()
    end = len(data)
    bad_frame = {
        "offset_gap": encode_header(end + 100, 4) + b"junk",
        "offset_behind": encode_header(end - 10, 4) + b"junk",
        "negative_size": end.to_bytes(8, "big") + (-4).to_bytes(4, "big", signed=True),
    }[bad]
    good = encode_header(0, end) + data
    server, reports, done = await _fake_master([good + bad_frame, bad_frame])
    port = server.sockets[0].getsockname()[1]
    slave, slave_ha = await start_slave(slave_config(tmp_path), port)
    try:
        await wait_until(done, timeout=10, what="a third connection")
        # It reported 0 (empty), then its real end twice: nothing bad was appended.
        assert reports == [0, end, end]
        assert slave.max_phy_offset == end
        assert commit_log_files(slave)[f"{0:020d}"][:end] == data
        assert not any(commit_log_files(slave)[f"{0:020d}"][end:])
        assert await slave.dispatcher.wait_dispatched(end)
        assert sorted(await queue_bodies(slave)) == [0, 1, 2]
    finally:
        await slave_ha.shutdown()
        await slave.shutdown()
        server.close()
        await server.wait_closed()


async def test_runtime_info_on_master_and_slave(pair: HAPair) -> None:
    server = pair.master_ha.server
    assert server is not None
    await pair.slave_requested()
    await put_many(pair.master, 10)
    await pair.caught_up()
    end = pair.master.max_phy_offset
    await wait_until(lambda: server.push2slave_max_offset == end, what="the ack")
    info = pair.master_ha.runtime_info()
    assert info["haSlaveNum"] == "1"
    assert info["haPush2SlaveMaxOffset"] == str(end)
    assert info["slaveFallBehindMuch"] == info["haTransferLag"] == "0"
    assert info["haSlaveAckOffset_0"] == str(end) and info["haSlaveLag_0"] == "0"
    assert info["haSlaveAddr_0"].startswith("127.0.0.1:")
    slave_info = pair.slave_ha.runtime_info()
    assert slave_info["masterAddr"] == f"127.0.0.1:{pair.port}"
    assert slave_info["haConnected"] == "true"
    assert slave_info["haSlaveMaxOffset"] == str(end)
    assert slave_info["slaveFallBehindMuch"] == "0"
    assert int(slave_info["haMasterOffset"]) == end


async def test_slave_without_a_master_address_waits_then_connects(tmp_path: Path) -> None:
    master, master_ha = await start_master(master_config(tmp_path))
    await put_many(master, 5)
    slave, slave_ha = await start_slave(slave_config(tmp_path), None)
    pair = HAPair(master, master_ha, slave, slave_ha)
    try:
        client = slave_ha.client
        assert client is not None and not client.connected
        assert slave_ha.runtime_info()["masterAddr"] == ""
        slave_ha.update_master_address(f"127.0.0.1:{pair.port}")
        await pair.caught_up()
    finally:
        await pair.close()


async def test_slave_store_refuses_client_writes(pair: HAPair) -> None:
    result = await pair.slave.put_message(inner(b"x"))
    assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE


async def test_slave_drops_a_silent_master_and_reconnects(tmp_path: Path) -> None:
    # A "master" that takes the report and then sends nothing, not even heartbeats.
    server, reports, done = await _fake_master([b"", b""])
    port = server.sockets[0].getsockname()[1]
    slave, slave_ha = await start_slave(slave_config(tmp_path, ha_housekeeping_interval=300), port)
    try:
        await wait_until(done, timeout=10, what="two housekeeping reconnects")
        assert reports == [0, 0, 0]
        client = slave_ha.client
        assert client is not None and client.reconnects >= 2
    finally:
        await slave_ha.shutdown()
        await slave.shutdown()
        server.close()
        await server.wait_closed()


async def test_connection_cut_mid_frame_resumes_byte_identically(tmp_path: Path) -> None:
    master, master_ha = await start_master(master_config(tmp_path))
    await put_many(master, 100)  # about 110 KiB: one full 64 KiB file, then some
    assert master_ha.ha_port is not None
    # 8 KiB frames: 3 frames and a half reach the slave, then the cut.
    proxy = CuttingProxy(master_ha.ha_port, cut_after=3 * (12 + 8192) + 5000)
    await proxy.start()
    slave, slave_ha = await start_slave(slave_config(tmp_path), proxy.port)
    pair = HAPair(master, master_ha, slave, slave_ha)
    try:
        await wait_until(lambda: proxy.connections >= 2, timeout=10, what="a reconnect")
        await put_many(master, 50)
        await pair.caught_up()
        assert proxy.cuts == 1
        # The slave started empty, so the first transfer began at the last file.
        assert commit_log_files(slave) == {
            name: data for name, data in commit_log_files(master).items()
            if int(name) >= slave.min_phy_offset
        }  # fmt: skip
        on_slave = await queue_bodies(slave)
        on_master = await queue_bodies(master)
        assert on_slave == {k: on_master[k] for k in on_slave} and max(on_slave) == 149
    finally:
        await pair.close()
        await proxy.close()


async def test_restarted_slave_resumes_from_its_own_offset(tmp_path: Path) -> None:
    master, master_ha = await start_master(master_config(tmp_path))
    slave, slave_ha = await start_slave(slave_config(tmp_path), master_ha.ha_port)
    pair = HAPair(master, master_ha, slave, slave_ha)
    await pair.slave_requested()
    await put_many(master, 80)
    await pair.caught_up()
    stopped_at = slave.max_phy_offset
    await slave_ha.shutdown()
    await slave.shutdown()
    await put_many(master, 150)  # two more files while the slave is away
    slave, slave_ha = await start_slave(slave_config(tmp_path), master_ha.ha_port)
    pair = HAPair(master, master_ha, slave, slave_ha)
    try:
        server = master_ha.server
        assert server is not None
        await pair.slave_requested()
        assert server.connections[0].request_offset == stopped_at  # not the last-file rule
        await pair.caught_up()
        assert commit_log_files(slave) == commit_log_files(master)
        assert sorted(await queue_bodies(slave)) == list(range(230))
    finally:
        await pair.close()
