"""HA benchmark: ASYNC_MASTER vs SYNC_MASTER produce rate with a slave on the HA socket.

What it measures, in one run, in one process (uvloop): a master MessageStore and a
slave MessageStore in temp directories, connected through ``HAService`` over a
real TCP socket on 127.0.0.1. Producers put 1 KiB messages in batches
(``put_messages``, ``--batch`` messages per put, ``--producers`` concurrent
producers) until ``--count`` messages are stored, first with the master as
ASYNC_MASTER, then (fresh stores) as SYNC_MASTER, where every batch waits for
the slave's acknowledgement.

Printed per mode: msgs/s until the last put answered; msgs/s until the slave
also holds every byte; replication lag under load (master max offset minus the
best slave ack, sampled every 5 ms while producing: mean, p99, max); the CPU the
process used per second of wall time (everything, master, slave, HA and both
dispatchers, shares one event loop, so this is the saturated resource when it
nears 1.0). Then the SYNC/ASYNC ratio (target >= 0.70).

Run: ``python benchmarks/ha_bench.py [--count 100000] [--batch 32] [--producers 8]``
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import uvloop

from aiorocketmq.broker.ha.service import HAService
from aiorocketmq.common.message import Message
from aiorocketmq.common.message_codec import encode_batch
from aiorocketmq.store.config import BrokerRole, MessageStoreConfig
from aiorocketmq.store.inner_message import MessageExtBatch
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import PutMessageStatus

TOPIC = "HABenchTopic"
HOSTS = {"born_host": ("192.168.1.20", 50123), "store_host": ("10.0.0.7", 10911)}
BODY = bytes(range(256)) * 4  # 1 KiB


@dataclass
class Row:
    """One mode's figures."""

    mode: str
    count: int  # messages stored
    put_s: float
    replicated_s: float
    lag_samples: list[int]
    cpu_s: float
    statuses: dict[str, int]


def config(root: Path, role: BrokerRole, args: argparse.Namespace) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=args.file_mib * 1024 * 1024,
        broker_role=role,
        ha_listen_port=0,
        ha_send_heartbeat_interval=1000,
    )


async def started(cfg: MessageStoreConfig) -> MessageStore:
    store = MessageStore(cfg)
    await store.load()
    await store.start()
    await store.commit_log.allocator.idle()  # the first file is ready (and warm)
    return store


def batch(n: int, size: int) -> MessageExtBatch:
    body = encode_batch([Message(topic=TOPIC, body=BODY) for _ in range(size)])
    return MessageExtBatch(topic=TOPIC, queue_id=n % 4, body=body, **HOSTS)  # type: ignore[arg-type]


async def run_mode(workdir: Path, role: BrokerRole, args: argparse.Namespace) -> Row:
    root = Path(tempfile.mkdtemp(prefix=f"ha-{role.value}-", dir=workdir))
    master = await started(config(root / "master", role, args))
    master_ha = HAService(master.config, host="127.0.0.1")
    master_ha.install(master)
    await master_ha.start()
    server = master_ha.server
    assert server is not None
    slave_cfg = config(root / "slave", BrokerRole.SLAVE, args)
    if args.slave_process:
        stop = multiprocessing.get_context("spawn").Event()
        child = multiprocessing.get_context("spawn").Process(
            target=slave_process_main, args=(slave_cfg, master_ha.ha_port, stop)
        )
        child.start()
        stop_slave = _child_stopper(child, stop)
    else:
        stop_slave = await _in_process_slave(slave_cfg, master_ha.ha_port)
    # No event marks "a slave connected": poll briefly (setup only, not measured).
    while not server.connections:  # noqa: ASYNC110
        await asyncio.sleep(0.005)
    await server.connections[0].requested.wait()
    try:
        return await _produce(role, master, master_ha, args)
    finally:
        await stop_slave()
        await master_ha.shutdown()
        await master.shutdown()
        shutil.rmtree(root, ignore_errors=True)


async def _in_process_slave(
    cfg: MessageStoreConfig, port: int | None
) -> Callable[[], Awaitable[None]]:
    slave = await started(cfg)
    slave_ha = HAService(slave.config)
    slave_ha.install(slave)
    slave_ha.update_master_address(f"127.0.0.1:{port}")
    await slave_ha.start()

    async def stop() -> None:
        await slave_ha.shutdown()
        await slave.shutdown()

    return stop


def _child_stopper(child: BaseProcess, event: Any) -> Callable[[], Awaitable[None]]:
    async def stop() -> None:
        event.set()
        await asyncio.get_running_loop().run_in_executor(None, child.join, 30)

    return stop


def slave_process_main(cfg: MessageStoreConfig, port: int, stop: Any) -> None:
    """The slave in a child process (``--slave-process``): runs until ``stop`` is set."""

    async def run() -> None:
        stop_slave = await _in_process_slave(cfg, port)
        await asyncio.get_running_loop().run_in_executor(None, stop.wait)
        await stop_slave()

    uvloop.run(run())


async def _produce(
    role: BrokerRole, master: MessageStore, master_ha: HAService, args: argparse.Namespace
) -> Row:
    server = master_ha.server
    assert server is not None
    puts = args.count // args.batch
    template = [batch(n, args.batch) for n in range(4)]
    statuses: dict[str, int] = {}
    next_put = 0
    lag: list[int] = []
    producing = True

    async def producer() -> None:
        nonlocal next_put
        while next_put < puts:
            n = next_put
            next_put += 1
            result = await master.put_messages(template[n % 4])
            statuses[result.status.name] = statuses.get(result.status.name, 0) + 1
            # An ASYNC_MASTER put never awaits anything that suspends: yield once per
            # put, as a broker does between two requests read from its sockets, or
            # the producers would starve the dispatcher and the HA writer.
            await asyncio.sleep(0)

    async def sampler() -> None:
        while producing:
            lag.append(master_ha.slave_fall_behind_much())
            await asyncio.sleep(0.005)

    sampling = asyncio.create_task(sampler())
    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(producer() for _ in range(args.producers)))
    put_s = time.perf_counter() - t0
    # Replicated = the slave acknowledged the master's last byte: wait like a
    # SYNC_MASTER put does (again after a FLUSH_SLAVE_TIMEOUT while it catches up).
    while await server.group_transfer.wait(master.max_phy_offset) is not PutMessageStatus.PUT_OK:
        pass
    replicated_s = time.perf_counter() - t0
    cpu_s = time.process_time() - cpu0
    producing = False
    await sampling
    return Row(role.value, puts * args.batch, put_s, replicated_s, lag, cpu_s, statuses)


def show(row: Row) -> None:
    lag = sorted(row.lag_samples) or [0]
    p99 = lag[min(len(lag) - 1, int(len(lag) * 0.99))]
    print(
        f"{row.mode:<13} {row.count / row.put_s:>10,.0f} msgs/s put"
        f"  {row.count / row.replicated_s:>10,.0f} msgs/s replicated"
        f"  lag mean {statistics.fmean(lag) / 1024:8.1f} KiB p99 {p99 / 1024:8.1f} KiB"
        f" max {lag[-1] / 1024:8.1f} KiB  cpu/wall {row.cpu_s / row.replicated_s:.2f}"
        f"  {row.statuses}"
    )


async def main(args: argparse.Namespace) -> None:
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.gettempdir())
    print(
        f"{args.count} x 1 KiB messages, batches of {args.batch}, {args.producers} producers,"
        f" {args.file_mib} MiB CommitLog files,"
        f" slave {'in a child process' if args.slave_process else 'in the same process'} (uvloop)"
    )
    rows: dict[str, list[Row]] = {"ASYNC_MASTER": [], "SYNC_MASTER": []}
    roles = [BrokerRole.ASYNC_MASTER, BrokerRole.SYNC_MASTER]
    for round_no in range(args.rounds):
        # Alternate which mode goes first, so neither always gets the quieter slot.
        for role in roles if round_no % 2 == 0 else roles[::-1]:
            row = await run_mode(workdir, role, args)
            rows[role.value].append(row)
            show(row)
    rate = {mode: [r.count / r.put_s for r in mode_rows] for mode, mode_rows in rows.items()}
    ratios = [s / a for s, a in zip(rate["SYNC_MASTER"], rate["ASYNC_MASTER"], strict=True)]
    ok = sum(r.statuses.get(PutMessageStatus.PUT_OK.name, 0) for r in rows["SYNC_MASTER"])
    sync_puts = sum(r.count for r in rows["SYNC_MASTER"]) // args.batch
    print(
        f"median put rate: ASYNC_MASTER {statistics.median(rate['ASYNC_MASTER']):,.0f} msgs/s,"
        f" SYNC_MASTER {statistics.median(rate['SYNC_MASTER']):,.0f} msgs/s;"
        f" SYNC/ASYNC per round {' '.join(f'{r:.2f}' for r in ratios)},"
        f" median {statistics.median(ratios):.2f} (target >= 0.70);"
        f" SYNC_MASTER puts answered PUT_OK: {ok}/{sync_puts}"
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="messages per mode")
    parser.add_argument("--batch", type=int, default=32, help="messages per put")
    parser.add_argument("--producers", type=int, default=8, help="concurrent producers")
    parser.add_argument("--file-mib", type=int, default=64, help="CommitLog file size")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of both modes")
    parser.add_argument(
        "--slave-process",
        action="store_true",
        help="run the slave in a child process (two cores, as real brokers) instead",
    )
    parser.add_argument("--workdir", default=None, help="where the stores go (default: tmp)")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
