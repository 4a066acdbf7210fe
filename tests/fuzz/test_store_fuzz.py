"""Store recovery on mutated files: reopen must work or fail typed, and keep what precedes.

A real ``MessageStore`` in ``tmp_path`` stores ``MESSAGES`` messages (2 queues, KEYS
for the index, bodies large enough to span two 64 KiB CommitLog files). Two images
are kept: one shut down cleanly, one copied while running (the abort file stays:
a crash). Each case copies an image, mutates bytes in one of its files (CommitLog
near the written tail, a ConsumeQueue, the checkpoint, an index file: bit flips,
garbage, zeroed ranges, truncation) and reopens it. ``load`` + ``start`` must
succeed or raise a ``StoreError``, within ``REOPEN_S`` (no hang); when it succeeds,
every message before the first corrupted byte reads back with its exact body and
an index query does not raise. ``AIOROCKETMQ_FUZZ_CASES`` scales the case count
(``STORE_CASES``, 300, at the default of 100,000).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.store.errors import StoreError
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageStatus
from tests.fuzz.mutate import DEFAULT_CASES, fuzz_cases
from tests.unit.store.store_support import (
    TOPIC,
    dispatched,
    inner,
    open_store,
    put_ok,
    store_config,
)

pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(300)]

MESSAGES = 48
QUEUES = 2
STORE_CASES = 300
REOPEN_S = 30.0


def body_of(seq: int) -> bytes:
    """Deterministic bodies of 1-4 KiB."""
    return (f"body-{seq}-".encode() * 500)[: 1024 + (seq * 397) % 3072]


@dataclass(frozen=True)
class Stored:
    """Where one message went."""

    seq: int
    queue_id: int
    queue_offset: int
    end: int  # physical offset just past its record


@dataclass(frozen=True)
class Mutation:
    """What one case changed, and from which byte on messages may be lost."""

    path: Path
    where: int
    kind: str
    #: A message survives when its record ends at or before this physical offset...
    commit_log_limit: int
    #: ...and its queue unit lies before this index in ``cq_queue`` (others: all).
    cq_queue: int = -1
    cq_limit: int = 1 << 62


async def _write_images(root: Path) -> tuple[Path, Path, list[Stored]]:
    clean, crashed = root / "clean", root / "crashed"
    store = await open_store(store_config(clean))
    stored = []
    try:
        for seq in range(MESSAGES):
            msg = inner(body_of(seq), queue_id=seq % QUEUES, KEYS=f"key-{seq}")
            result = await put_ok(store, msg)
            end = result.physical_offset + result.wrote_bytes
            stored.append(Stored(seq, seq % QUEUES, result.queue_offset, end))
        await dispatched(store)
        await store.write_checkpoint()
        # A running store's files, as a crash leaves them (the abort file stays).
        await asyncio.to_thread(shutil.copytree, clean, crashed)
    finally:
        await store.shutdown()
    return clean, crashed, stored


def _files(image: Path, sub: str) -> list[Path]:
    return sorted(p for p in (image / sub).rglob("*") if p.is_file())


def _mutate(image: Path, stored: list[Stored], rng: random.Random) -> Mutation:
    """Damage one file of ``image`` in place."""
    target = rng.choice(["commitlog", "commitlog", "consumequeue", "checkpoint", "index"])
    if target == "checkpoint":
        path = image / "checkpoint"
        return _damage(path, rng.randrange(path.stat().st_size), rng, 1 << 62)
    if target == "commitlog":
        tail = stored[-1].end
        offset = rng.randrange(max(0, tail - 24 * 1024), tail)
        files = _files(image, "commitlog")
        size = files[0].stat().st_size
        return _damage(files[offset // size], offset % size, rng, offset)
    if target == "index":
        path = rng.choice(_files(image, "index"))
        return _damage(path, rng.randrange(path.stat().st_size), rng, 1 << 62)
    path = rng.choice(_files(image, "consumequeue"))
    written = sum(1 for s in stored if s.queue_id == int(path.parent.name)) * 20
    where = rng.randrange(written)
    mutation = _damage(path, where, rng, 1 << 62)
    return Mutation(
        mutation.path, where, mutation.kind, 1 << 62, int(path.parent.name), where // 20
    )


def _damage(path: Path, where: int, rng: random.Random, commit_log_limit: int) -> Mutation:
    data = bytearray(path.read_bytes())
    kind = rng.choice(["flip", "garbage", "zero", "truncate"])
    if kind == "flip":
        data[where] ^= 1 << rng.randrange(8)
    elif kind == "garbage":
        chunk = rng.randbytes(rng.randint(1, 64))
        data[where : where + len(chunk)] = chunk[: len(data) - where]
    elif kind == "zero":
        length = rng.randint(1, 256)
        data[where : where + length] = bytes(min(length, len(data) - where))
    else:
        del data[where:]
    path.write_bytes(bytes(data))
    return Mutation(path, where, kind, commit_log_limit)


async def _reopen_and_check(
    image: Path, stored: list[Stored], mutation: Mutation
) -> StoreError | None:
    """None when the store opened (and kept what precedes the damage), else its typed error."""
    store = MessageStore(store_config(image))
    try:
        try:
            await asyncio.wait_for(_load_and_start(store), REOPEN_S)
        except StoreError as exc:
            return exc
        for item in stored:
            if item.end > mutation.commit_log_limit:
                continue
            if item.queue_id == mutation.cq_queue and item.queue_offset >= mutation.cq_limit:
                continue
            result = store.get_message("g", TOPIC, item.queue_id, item.queue_offset, 1)
            assert result is not None and result.status is GetMessageStatus.FOUND, (
                f"{mutation}: message {item} lost: {result}"
            )
            with result:
                assert decode_record(result.messages[0]).body == body_of(item.seq), mutation
        store.query_message(TOPIC, "key-3", 32, 0, 1 << 62).release()
        return None
    finally:
        await asyncio.wait_for(store.shutdown(), REOPEN_S)


async def _load_and_start(store: MessageStore) -> None:
    await store.load()
    await store.start()


async def test_reopen_mutated_stores(tmp_path: Path) -> None:
    clean, crashed, stored = await _write_images(tmp_path)
    assert (crashed / "abort").exists() and not (clean / "abort").exists()
    assert stored[-1].end > 64 * 1024  # two CommitLog files
    cases = max(20, STORE_CASES * fuzz_cases() // DEFAULT_CASES)
    rng = random.Random(20261122)
    opened = 0
    refused: Counter[str] = Counter()
    started = time.perf_counter()
    for case in range(cases):
        image = tmp_path / f"case-{case % 4}"
        shutil.rmtree(image, ignore_errors=True)
        shutil.copytree(clean if case % 2 == 0 else crashed, image)
        mutation = _mutate(image, stored, rng)
        error = await _reopen_and_check(image, stored, mutation)
        if error is None:
            opened += 1
        else:
            refused[f"{mutation.path.parent.name}/{mutation.kind}: {type(error).__name__}"] += 1
    elapsed = time.perf_counter() - started
    print(
        f"store fuzz: {cases} mutated stores in {elapsed:.1f} s: {opened} opened, "
        f"refused: {dict(refused)}"
    )
    assert opened > cases // 2
