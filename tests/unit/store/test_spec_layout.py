"""The file layer's acceptance test: the bytes on disk are where specs/store.md puts them.

The first half writes a store through the file-layer APIs only (CommitLog appends across
several 64 KiB files, batches, IPv6 hosts, a prepared transaction, ConsumeQueue units
including a queue that starts mid-stream, IndexFile keys across several rotated files),
acting as the dispatcher would.

The second half forgets all of that code: it decodes ``commitlog/``, ``consumequeue/``
and ``index/`` with a decoder written here from the spec (§1, §3.2-3.6, §4, §5) using
``struct`` and ``zlib`` only, and checks that every record, BLANK filler, ConsumeQueue
unit and index slot/item is exactly where the spec says, with the values it says.
"""

from __future__ import annotations

import random
import struct
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.message_codec import encode_record
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.commit_log import AppendStatus, CommitLog, queue_key
from aiorocketmq.store.consume_queue import PutUnitStatus
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.dispatch_request import DispatchRequest
from aiorocketmq.store.index_service import IndexService
from tests.unit.store.helpers import small_config

CL_SIZE = 64 * 1024
CQ_UNITS_PER_FILE = 16
CQ_SIZE = CQ_UNITS_PER_FILE * 20
SLOTS, ITEMS = 8, 12
T0 = 1_700_000_000_000
STORE_HOST = ("10.0.0.7", 10911)
V4_BORN, V6_BORN = ("192.168.1.20", 50123), ("2001:db8::42", 50124)
MAGIC, BLANK = 0xDAA320A7, 0xCBD43194
PREPARED = 0x4


# ---------------------------------------------------------------------------------------
# What we write: a model kept by the test itself.
# ---------------------------------------------------------------------------------------


@dataclass
class Msg:
    topic: str
    queue_id: int
    body: bytes
    tags: str | None
    keys: list[str]
    uniq: str | None
    born: tuple[str, int]
    sys_flag: int
    store_ts: int = 0
    physical_offset: int = -1
    queue_offset: int = -1
    size: int = 0

    @property
    def properties(self) -> bytes:
        pairs = []
        if self.tags is not None:
            pairs.append(("TAGS", self.tags))
        if self.keys:
            pairs.append(("KEYS", " ".join(self.keys)))
        if self.uniq is not None:
            pairs.append(("UNIQ_KEY", self.uniq))
        return "\x02".join(f"{k}\x01{v}" for k, v in pairs).encode()

    def encode(self) -> bytearray:
        return encode_record(
            topic=self.topic, body=self.body, properties=self.properties, queue_id=self.queue_id,
            sys_flag=self.sys_flag, born_timestamp=T0 - 5, born_host=self.born,
            store_timestamp=0, store_host=STORE_HOST,
        )  # fmt: skip


@dataclass
class Written:
    messages: list[Msg] = field(default_factory=list)
    queue_counters: Counter[str] = field(default_factory=Counter)


def make_messages(rng: random.Random) -> list[list[Msg]]:
    """Groups of messages; a group of several is one batch (same queue, plain)."""
    groups: list[list[Msg]] = []
    tags = ["TagA", "TagB", "标签", "🍺", None]
    for n in range(260):
        topic, queue_id = rng.choice([("TopicA", 0), ("TopicA", 1), ("TopicB", 0), ("TopicC", 0)])
        count = 3 if n % 25 == 24 else 1
        group = [
            Msg(
                topic=topic,
                queue_id=queue_id,
                body=rng.randbytes(rng.choice([0, 1, 200, 1500, 4000])),
                tags=rng.choice(tags),
                keys=[f"k{n}-{j}", f"sh{n % 7}"][: rng.randint(0, 2)],
                uniq=f"UNIQ{n:05d}{j}" if n % 3 else None,
                born=V6_BORN if n % 11 == 0 else V4_BORN,
                sys_flag=PREPARED if (count == 1 and n % 40 == 13) else 0,
            )
            for j in range(count)
        ]
        groups.append(group)
    return groups


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-layout", 2)
    yield pool
    await pool.shutdown()


async def write_store(root: Path, executor: BlockingExecutor) -> Written:
    config = small_config(
        root,
        mapped_file_size_commit_log=CL_SIZE,
        mapped_file_size_consume_queue=CQ_SIZE,
        max_hash_slot_num=SLOTS,
        max_index_num=ITEMS,
    )
    commit_log = CommitLog(config, executor)
    await commit_log.start()
    queues = ConsumeQueueTable(config, executor)
    await queues.start()
    clock = ManualClock(T0)
    index = IndexService(config, executor, clock=clock)
    written = Written()
    commit_log.set_queue_offset("TopicC", 0, 37)  # TopicC-0 starts mid-stream
    written.queue_counters["TopicC-0"] = 37
    for n, group in enumerate(make_messages(random.Random(20240501))):
        store_ts = T0 + n * 700
        clock.advance(700)
        await append_group(commit_log, group, store_ts, written)
        for msg in group:
            await dispatch(queues, index, msg)
    await commit_log.flush(0)
    await commit_log.shutdown()
    await queues.flush(0)
    await queues.shutdown()
    await index.shutdown()
    index.close()
    return written


async def append_group(commit_log: CommitLog, group: list[Msg], ts: int, written: Written) -> None:
    key = queue_key(group[0].topic, group[0].queue_id)
    data = bytearray().join(m.encode() for m in group)
    for _ in range(2):
        if len(group) == 1:
            result = commit_log.append(data, key, ts)
        else:
            result = commit_log.append_batch(data, key, ts)
        if result.status is not AppendStatus.NEED_FILE:
            break
        await commit_log.allocate_next_file()
    assert result.status is AppendStatus.PUT_OK
    offsets = result.record_offsets or [result.physical_offset]
    for msg, physical in zip(group, offsets, strict=True):
        msg.store_ts, msg.physical_offset = ts, physical
        msg.size = len(msg.encode())
        if msg.sys_flag & 0xC in (0x4, 0xC):
            msg.queue_offset = 0
        else:
            msg.queue_offset = written.queue_counters[key]
            written.queue_counters[key] += 1
        written.messages.append(msg)


async def dispatch(queues: ConsumeQueueTable, index: IndexService, msg: Msg) -> None:
    req = DispatchRequest(
        topic=msg.topic, queue_id=msg.queue_id, commit_log_offset=msg.physical_offset,
        msg_size=msg.size, tags_code=java_hash(msg.tags) if msg.tags else 0,
        store_timestamp=msg.store_ts, consume_queue_offset=msg.queue_offset,
        keys=" ".join(msg.keys) or None, uniq_key=msg.uniq, sys_flag=msg.sys_flag,
    )  # fmt: skip
    if req.builds_consume_queue:
        queue = queues.find_or_create(msg.topic, msg.queue_id)
        args = (req.commit_log_offset, req.msg_size, req.tags_code, req.consume_queue_offset)
        status = queue.put(*args, store_timestamp=msg.store_ts)
        if status is PutUnitStatus.NEED_FILE:
            await queue.allocate_file(req.consume_queue_offset)
            status = queue.put(*args, store_timestamp=msg.store_ts)
        assert status is PutUnitStatus.OK
    while not index.build_index(req):
        await index.create_file()


# ---------------------------------------------------------------------------------------
# The decoder, from the spec only.
# ---------------------------------------------------------------------------------------


def java_hash(text: str) -> int:
    """String.hashCode: 31*h + c over UTF-16 code units, signed 32-bit."""
    h = 0
    for (unit,) in struct.iter_unpack(">H", text.encode("utf-16-be", "surrogatepass")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def index_hash(key: str) -> int:
    h = java_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


@dataclass
class DiskRecord:
    physical_offset: int
    total: int
    fields: dict[str, object]


def decode_commit_log(directory: Path) -> tuple[list[DiskRecord], list[tuple[int, int]]]:
    """Every record and every BLANK filler (offset, size), walking §3.2 / §3.6."""
    names = sorted(p.name for p in directory.iterdir())
    assert all(len(n) == 20 and n.isdigit() for n in names), names
    starts = [int(n) for n in names]
    assert starts == [i * CL_SIZE for i in range(len(starts))], "contiguous from 0"
    records, blanks = [], []
    for start in starts:
        data = (directory / f"{start:020d}").read_bytes()
        assert len(data) == CL_SIZE
        pos = 0
        while pos + 8 <= CL_SIZE:
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic == BLANK:
                assert total == CL_SIZE - pos >= 8, "BLANK spans the rest of the file"
                assert data[pos + 8 :] == bytes(CL_SIZE - pos - 8), "only 8 bytes written"
                blanks.append((start + pos, total))
                break
            if total == 0 and magic == 0:
                assert start == starts[-1], "the written end is only in the last file"
                assert data[pos:] == bytes(CL_SIZE - pos)
                break
            assert magic == MAGIC, f"illegal magic at {start + pos}"
            records.append(DiskRecord(start + pos, total, decode_fields(data, pos)))
            assert CL_SIZE - (pos + total) >= 8, "every record leaves at least 8 bytes"
            pos += total
    return records, blanks


def decode_fields(data: bytes, pos: int) -> dict[str, object]:
    total, _, body_crc, queue_id, flag, queue_offset, physical, sys_flag, born_ts = (
        struct.unpack_from(">iiiiiqqiq", data, pos)
    )
    at = pos + 48
    born_len = 16 if sys_flag & 0x10 else 4
    born_ip, born_port = data[at : at + born_len], struct.unpack_from(">i", data, at + born_len)[0]
    at += born_len + 4
    (store_ts,) = struct.unpack_from(">q", data, at)
    at += 8
    store_len = 16 if sys_flag & 0x20 else 4
    store_ip, store_port = (
        data[at : at + store_len],
        struct.unpack_from(">i", data, at + store_len)[0],
    )
    at += store_len + 4
    reconsume, prepared_offset, body_len = struct.unpack_from(">iqi", data, at)
    at += 16
    body = data[at : at + body_len]
    at += body_len
    topic_len = data[at]
    topic = data[at + 1 : at + 1 + topic_len].decode()
    at += 1 + topic_len
    (props_len,) = struct.unpack_from(">h", data, at)
    props = data[at + 2 : at + 2 + props_len]
    assert at + 2 + props_len == pos + total, "fields fill TOTALSIZE exactly"
    assert total == 91 + body_len + topic_len + props_len + (12 if born_len == 16 else 0)
    assert body_crc == zlib.crc32(body) & 0x7FFFFFFF
    return {
        "queue_id": queue_id, "flag": flag, "queue_offset": queue_offset, "physical": physical,
        "sys_flag": sys_flag, "born_ts": born_ts, "born": (born_ip, born_port),
        "store_ts": store_ts, "store": (store_ip, store_port), "reconsume": reconsume,
        "prepared_offset": prepared_offset, "body": body, "topic": topic, "props": props,
    }  # fmt: skip


def decode_consume_queue(directory: Path) -> dict[int, tuple[int, int, int]]:
    """queue offset -> unit, for every written unit (zeros end the queue)."""
    names = sorted(p.name for p in directory.iterdir())
    units = {}
    for name in names:
        data = (directory / name).read_bytes()
        assert len(data) == CQ_SIZE and len(name) == 20 and int(name) % CQ_SIZE == 0
        for pos in range(0, CQ_SIZE, 20):
            unit = struct.unpack_from(">qiq", data, pos)
            if unit == (0, 0, 0):
                break
            units[(int(name) + pos) // 20] = unit
    return units


@dataclass
class DiskIndex:
    name: str
    header: tuple[int, int, int, int, int, int]
    slots: list[int]
    items: list[tuple[int, int, int, int]]  # item n at [n]; [0] unused


def decode_index(directory: Path) -> list[DiskIndex]:
    files = []
    for path in sorted(directory.iterdir()):
        data = path.read_bytes()
        assert len(data) == 40 + SLOTS * 4 + ITEMS * 20
        assert len(path.name) == 17 and path.name.isdigit()
        header = struct.unpack_from(">qqqqii", data, 0)
        slots = [struct.unpack_from(">i", data, 40 + s * 4)[0] for s in range(SLOTS)]
        base = 40 + SLOTS * 4
        items = [struct.unpack_from(">iqii", data, base + n * 20) for n in range(ITEMS)]
        files.append(DiskIndex(path.name, header, slots, items))  # type: ignore[arg-type]
    return files


# ---------------------------------------------------------------------------------------
# The checks.
# ---------------------------------------------------------------------------------------


async def test_files_are_laid_out_as_the_spec_says(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    written = await write_store(tmp_path, executor)
    check_commit_log(tmp_path / "commitlog", written.messages)
    check_consume_queues(tmp_path / "consumequeue", written.messages)
    check_index(tmp_path / "index", written.messages)


def check_commit_log(directory: Path, messages: list[Msg]) -> None:
    records, blanks = decode_commit_log(directory)
    assert (
        len(records) == len(messages) and len({m.physical_offset // CL_SIZE for m in messages}) >= 5
    )
    assert len(blanks) == len(list(directory.iterdir())) - 1, "every full file ends in a BLANK"
    for record, msg in zip(records, messages, strict=True):
        f = record.fields
        assert record.physical_offset == f["physical"] == msg.physical_offset
        assert record.total == msg.size
        assert (f["topic"], f["queue_id"], f["body"], f["props"]) == (
            msg.topic, msg.queue_id, msg.body, msg.properties,
        )  # fmt: skip
        assert f["queue_offset"] == msg.queue_offset and f["store_ts"] == msg.store_ts
        assert f["sys_flag"] == msg.sys_flag | (0x10 if msg.born == V6_BORN else 0)
        assert f["store"] == (bytes([10, 0, 0, 7]), 10911) and f["born_ts"] == T0 - 5
    # A record went to the next file exactly when it did not fit with 8 bytes to spare.
    for blank_at, blank_size in blanks:
        following = next(m for m in messages if m.physical_offset > blank_at)
        assert following.physical_offset == blank_at + blank_size
        batch = [m for m in messages if m.store_ts == following.store_ts]
        assert sum(m.size for m in batch) + 8 > blank_size


def check_consume_queues(root: Path, messages: list[Msg]) -> None:
    expected: dict[tuple[str, int], dict[int, tuple[int, int, int]]] = defaultdict(dict)
    for msg in messages:
        if msg.sys_flag & 0xC in (0, 0x8):
            unit = (msg.physical_offset, msg.size, java_hash(msg.tags) if msg.tags else 0)
            expected[(msg.topic, msg.queue_id)][msg.queue_offset] = unit
    found_dirs = {(p.parent.name, int(p.name)) for p in root.glob("*/*")}
    assert found_dirs == set(expected)
    for (topic, queue_id), units in expected.items():
        on_disk = decode_consume_queue(root / topic / str(queue_id))
        first = min(units)
        blanks = {q: u for q, u in on_disk.items() if q < first}
        assert blanks == {
            q: (0, 0x7FFFFFFF, 0) for q in range(first - first % CQ_UNITS_PER_FILE, first)
        }
        assert {q: u for q, u in on_disk.items() if q >= first} == units
    assert min(expected[("TopicC", 0)]) == 37 and len(list((root / "TopicA" / "0").iterdir())) >= 3


def check_index(directory: Path, messages: list[Msg]) -> None:
    files = decode_index(directory)
    assert [f.name for f in files] == sorted(f.name for f in files) and len(files) >= 10
    expected = [
        (index_hash(f"{m.topic}#{key}"), m)
        for m in messages
        for key in ([m.uniq] if m.uniq is not None else []) + m.keys
    ]
    items = [(f, n) for f in files for n in range(1, f.header[5])]
    assert len(items) == len(expected), "one item per key, none lost, none doubled"
    store_times = {m.physical_offset: m.store_ts for m in messages}
    prev_end_ts = 0
    for f in files:
        check_index_file(f, prev_end_ts, store_times)
        prev_end_ts = f.header[1]
    by_phy = {m.physical_offset: m for m in messages}
    for (f, n), (key_hash, msg) in zip(items, expected, strict=True):
        item_hash, phy, _, _ = f.items[n]
        assert (item_hash, by_phy[phy]) == (key_hash, msg), "items in dispatch order"
        assert n in chain(f, key_hash % SLOTS), "reachable from its slot"
    first_name = files[0].name
    stamp = time.strptime(first_name[:14], "%Y%m%d%H%M%S")
    assert int(time.mktime(stamp)) * 1000 + int(first_name[14:]) >= T0


def check_index_file(f: DiskIndex, prev_end_ts: int, store_times: dict[int, int]) -> None:
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = f.header
    assert 2 <= index_count <= ITEMS, "indexCount = items written + 1"
    first, last = f.items[1], f.items[index_count - 1]
    assert (begin_phy, end_phy) == (first[1], last[1])
    assert (begin_ts, end_ts) == (store_times[first[1]], store_times[last[1]])
    assert slot_count == sum(1 for s in f.slots if s != 0)
    for n in range(1, index_count):
        _, _, diff, prev = f.items[n]
        assert 0 <= prev < n, "chains point to older items"
        item_ts = store_times[f.items[n][1]]
        # timeDiff is taken before the put updates the header: the first item of a
        # file measures from the begin time it was created with (the previous end).
        base = prev_end_ts if n == 1 else begin_ts
        assert diff == (max(item_ts - base, 0) // 1000 if base > 0 else 0)
    assert all(item == (0, 0, 0, 0) for item in f.items[index_count:]), "unused items stay zero"
    assert f.items[0] == (0, 0, 0, 0), "item 0 is never used"
    assert begin_ts <= end_ts


def chain(f: DiskIndex, slot: int) -> list[int]:
    seen, current = [], f.slots[slot]
    while 0 < current < f.header[5] and current not in seen:
        seen.append(current)
        current = f.items[current][3]
    return seen
