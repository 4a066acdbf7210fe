"""Child process of the store crash test: verify what the last run acknowledged, then put.

Run as ``python store_crash_child.py ROOT LEDGER``. On start it loads the store in
ROOT (after a SIGKILL that is an abnormal recovery) and checks, against LEDGER (the
acknowledgements the parent collected from earlier runs):

* every acknowledged message is readable at its queue offset with its exact body;
* the CommitLog holds only whole, CRC-valid records up to its max offset;
* every ConsumeQueue unit points at a record of its own topic, queue and offset.

It prints ``VERIFIED <n>`` (or ``VERIFY-FAILED <why>`` and exits 3), then puts
messages with SYNC_FLUSH from 16 concurrent writers forever, printing
``ACK <seq> <queue_id> <queue_offset>`` only after the store acknowledged PUT_OK.
The parent SIGKILLs it at a random moment.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path

from aiorocketmq.common.message_codec import RecordScanner, decode_record
from aiorocketmq.common.properties import properties_to_string
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageStatus, PutMessageStatus

TOPIC = "CrashTopic"
QUEUES = 4
WRITERS = 16


def config_for(root: Path) -> MessageStoreConfig:
    """Small files so that runs cross many CommitLog and ConsumeQueue files."""
    return MessageStoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=128 * 1024,
        mapped_file_size_consume_queue=20 * 200,
        max_hash_slot_num=64,
        max_index_num=2000,
        flush_disk_type="SYNC_FLUSH",
        flush_interval_consume_queue=50,
        verify_writes=True,
    )


def body_of(seq: int) -> bytes:
    """Deterministic, size-varying bodies: a checker can rebuild them from ``seq``."""
    return (f"msg-{seq}-".encode() * (1 + seq % 37))[: 40 + (seq * 13) % 900]


def verify(store: MessageStore, ledger: list[list[int]]) -> str | None:
    """None when every rule holds, else the first violation."""
    for seq, queue_id, queue_offset in ledger:
        result = store.get_message("crash", TOPIC, queue_id, queue_offset, 1)
        if result is None or result.status is not GetMessageStatus.FOUND:
            return f"ack seq={seq} q={queue_id} off={queue_offset} not found: {result}"
        with result:
            record = decode_record(result.messages[0])
            if record.body != body_of(seq):
                return f"ack seq={seq} has a different body"
    return check_commit_log(store) or check_consume_queues(store) or check_index(store, ledger)


def check_index(store: MessageStore, ledger: list[list[int]]) -> str | None:
    """The key of every acknowledged message is found by a query (the latest 300, where
    a crash leaves the index half-written, and 200 older ones at random)."""
    recent = ledger[-300:]
    older = random.sample(ledger[:-300], min(200, max(len(ledger) - 300, 0)))
    for seq, _queue_id, _queue_offset in recent + older:
        with store.query_message(TOPIC, f"k{seq}", 8, 0, 2**62) as found:
            if found.message_count < 1:
                return f"ack seq={seq}: key k{seq} not found by a query"
    return None


def check_commit_log(store: MessageStore) -> str | None:
    """Whole, CRC-valid records only, up to the max offset (no partial record)."""
    end = store.max_phy_offset
    for mapped in store.commit_log.queue.files:
        limit = min(mapped.wrote_position, end - mapped.file_from_offset)
        scanner = RecordScanner(mapped.buffer, 0, max(limit, 0), check_crc=True)
        for _ in scanner:
            pass
        if scanner.stop is not None and not scanner.stop.clean:
            return f"commitlog file {mapped.file_name}: {scanner.stop}"
    return None


def check_consume_queues(store: MessageStore) -> str | None:
    """Every unit points at a record of its own topic, queue and queue offset."""
    for queue_id in range(QUEUES):
        low = store.get_min_offset_in_queue(TOPIC, queue_id)
        high = store.get_max_offset_in_queue(TOPIC, queue_id)
        for offset in range(low, high):
            physical = store.get_commit_log_offset_in_queue(TOPIC, queue_id, offset)
            held = store.select_one_message_by_offset(physical)
            if held is None:
                return f"unit q={queue_id} off={offset} -> {physical}: no record"
            with held:
                record = decode_record(held.view)
                if (record.topic, record.queue_id, record.queue_offset) != (
                    TOPIC,
                    queue_id,
                    offset,
                ):
                    return f"unit q={queue_id} off={offset} points at {record!r}"
    return None


async def put_forever(store: MessageStore, first_seq: int) -> None:
    next_seq = first_seq

    async def writer() -> None:
        nonlocal next_seq
        while True:
            seq, next_seq = next_seq, next_seq + 1
            queue_id = seq % QUEUES
            props = {"KEYS": f"k{seq}"}
            msg = MessageExtBrokerInner(
                topic=TOPIC, queue_id=queue_id, body=body_of(seq), properties=props,
                properties_string=properties_to_string(props), born_timestamp=seq,
                born_host=("127.0.0.1", 40000), store_host=("127.0.0.1", 10911),
            )  # fmt: skip
            result = await store.put_message(msg)
            if result.status is PutMessageStatus.PUT_OK:
                sys.stdout.write(f"ACK {seq} {queue_id} {result.queue_offset}\n")
                sys.stdout.flush()

    await asyncio.gather(*(writer() for _ in range(WRITERS)))


async def main(root: Path, ledger: list[list[int]]) -> int:
    store = MessageStore(config_for(root))
    await store.load()
    await store.start()
    problem = verify(store, ledger)
    if problem is not None:
        print(f"VERIFY-FAILED {problem}", flush=True)
        return 3
    print(f"VERIFIED {len(ledger)}", flush=True)
    total = sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES))
    await put_forever(store, total)
    return 0


if __name__ == "__main__":
    ledger_file = Path(sys.argv[2])
    acked = json.loads(ledger_file.read_text()) if ledger_file.exists() else []
    sys.exit(asyncio.run(main(Path(sys.argv[1]), acked)))
