"""IndexService: the IndexFiles of a store, their keys, rotation, queries and expiry.

Owns: ``index/`` (``IndexService.java``; specs/store.md §5.3-§5.5): which keys a
message gets (``topic#UNIQ_KEY``, then ``topic#<each KEYS word>``; ROLLBACK records
none), the newest file they go into, a new file when it fills (named by the clock,
``yyyyMMddHHmmssSSS``, continuing the previous file's end offset and time), the
query across files newest first within a time window, and deleting files whose
endPhyOffset fell below the CommitLog's min offset (never the last file).

Must not: create, flush or delete files on the event loop. ``build_index`` is a plain
method that answers False when the current file is full; the dispatcher then awaits
``create_file()`` and calls it again with the same request, which carries on with
the keys not yet written (a message's keys may span two files, as in RocketMQ).

When a file is superseded, it is flushed in the executor in the background and, if
it was full, ``on_file_full(file)`` runs on the loop: the store sets the
checkpoint's ``indexMsgTimestamp`` to ``file.end_timestamp`` and flushes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np

from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.tag_hash import index_key_hash, index_key_hashes
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.dispatch_request import DispatchRequest
from aiorocketmq.store.index_file import IndexFile, index_file_name
from aiorocketmq.store.mapped_file import delete_files_blocking

__all__ = ["IndexService", "QueryOffsetResult", "index_keys"]

_SCALAR_KEYS: Final = 16  # also the most IndexFile.put_hash_list (the C kernel) takes
"""Up to this many keys per call are hashed and put one by one (numpy's fixed cost is
about that of 16 scalar hashes)."""

_KERNEL_REQUESTS: Final = 8
"""From this many requests (a chunk, a batch) their keys are gathered by the C kernel,
which hands back arrays; fewer (a single send's) keep the lists of the scalar way."""

_ROLLBACK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

#: ``index_key_table`` (``_hash_kernels.pyx``) when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.common._hash_kernels")

log = logging.getLogger(__name__)


@dataclass(slots=True)
class QueryOffsetResult:
    """What an index query found (``QueryOffsetResult``).

    Attributes:
        phy_offsets: CommitLog offsets, newest file first (may hold collisions).
        index_last_update_timestamp: endTimestamp of the newest file.
        index_last_update_phyoffset: endPhyOffset of the newest file.
    """

    phy_offsets: list[int]
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


def index_keys(request: DispatchRequest) -> list[str]:
    """The index keys of a message: ``topic#UNIQ_KEY``, then ``topic#key`` per KEYS word."""
    topic = request.topic
    keys = [f"{topic}#{request.uniq_key}"] if request.uniq_key is not None else []
    if request.keys:
        keys.extend(f"{topic}#{k}" for k in request.keys.split(MessageConst.KEY_SEPARATOR) if k)
    return keys


def gather_keys(
    requests: Sequence[DispatchRequest], end_phy: int, resume: tuple[int, int] | None
) -> tuple[list[str], list[int]]:
    """The index keys of ``requests`` still to put, and per key its request's position.

    A request below ``end_phy`` was indexed before (a redispatch); a rolled-back one
    has nothing to index; of the one at ``resume[0]``, the first ``resume[1]`` keys
    are in a previous file already. ``index_key_table`` is the C twin.
    """
    keys: list[str] = []
    owners: list[int] = []
    for position, request in enumerate(requests):
        offset = request.commit_log_offset
        if offset < end_phy or request.transaction_type == _ROLLBACK:
            continue
        found = index_keys(request)
        if resume is not None and resume[0] == offset:
            found = found[resume[1] :]
        keys.extend(found)
        owners.extend([position] * len(found))
    return keys, owners


class IndexService(Service):
    """The store's IndexFiles; see the module docstring.

    Args:
        config: index directory, slot and item counts, ``messageIndexEnable``,
            ``maxMsgsNumBatch``.
        executor: the store's pool for blocking work.
        clock: names new files.
        on_file_full: called on the loop after a full, superseded file was flushed.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        executor: BlockingExecutor,
        *,
        clock: Clock | None = None,
        on_file_full: Callable[[IndexFile], None] | None = None,
    ) -> None:
        super().__init__("index-service")
        self.directory = config.index_dir
        self.hash_slot_num = config.max_hash_slot_num
        self.index_num = config.max_index_num
        self.enabled = config.message_index_enable
        self.max_msgs_num_batch = config.max_msgs_num_batch
        self.preallocate = config.preallocate_commit_log_blocks
        self.on_file_full = on_file_full
        self._executor = executor
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._files: list[IndexFile] = []
        self._resume: tuple[int, int] | None = None  # (commit log offset, keys done)
        self._creating: asyncio.Future[IndexFile] | None = None

    @property
    def files(self) -> list[IndexFile]:
        """A copy of the file list, oldest first."""
        return list(self._files)

    # -- load (load/recovery phase) ----------------------------------------------------

    def load_blocking(self, last_exit_ok: bool, index_msg_timestamp: int) -> list[Path]:
        """Map the index files, oldest first; after a crash, drop the unsafe ones.

        After an abnormal exit, every file that began after the checkpoint's
        ``indexMsgTimestamp`` is deleted; recovery re-indexes from before that time.
        RocketMQ also deletes the file being written (its end is past the
        checkpoint), losing every key in it that the replay does not reach again;
        ours keeps it: its entries up to the checkpoint are on disk (the store flushes
        it with every checkpoint), the replay adds the keys after its header's end,
        and what an OS crash left half-written there can only cut a hash chain
        short (a query then misses keys; nothing breaks). Names that are not all
        digits are skipped with a warning, as RocketMQ does.

        Returns:
            The paths deleted.
        """
        try:
            names = sorted(p.name for p in self.directory.iterdir())
        except FileNotFoundError:
            return []
        deleted = []
        try:
            for name in names:
                if not name.isdigit():
                    log.warning("skipping %s in %s: not an IndexFile name", name, self.directory)
                    continue
                path = self.directory / name
                index = IndexFile.open_blocking(path, self.hash_slot_num, self.index_num)
                if not last_exit_ok and index.begin_timestamp > index_msg_timestamp:
                    index.mapped.shutdown()
                    index.mapped.delete_blocking()
                    deleted.append(path)
                    continue
                index.shadow_blocking()  # the writable file (a full one is left as it is)
                self._files.append(index)
        except BaseException:
            self.close()  # nothing stays mapped when the load fails
            self._files.clear()
            raise
        log.info("loaded %d index file(s), deleted %d", len(self._files), len(deleted))
        return deleted

    # -- build (event loop, no await) --------------------------------------------------

    def writable_file(self) -> IndexFile | None:
        """The newest file if it has room."""
        if self._files and not self._files[-1].is_write_full:
            return self._files[-1]
        return None

    def build_index(self, request: DispatchRequest) -> bool:
        """Index a dispatched message (``buildIndex``).

        Returns:
            True when done (or nothing to do); False when the current file is full
            or missing: ``await create_file()`` and call again with the same request.
        """
        return self.build_indexes([request]) == 1

    def build_indexes(self, requests: Sequence[DispatchRequest]) -> int:
        """Index many dispatched messages at once, as ``build_index`` on each in turn.

        The keys of all of them are hashed in one pass and written in one run per file.

        Returns:
            How many requests are done, a prefix of ``requests``; when fewer than all,
            the next one needs a new file: ``await create_file()`` and call again from it.
        """
        if not self.enabled or not requests:
            return len(requests)
        index = self.writable_file()
        end_phy = index.end_phy_offset if index is not None else -1
        resume = self._resume
        self._resume = None
        if (
            len(requests) == 1
            and _KERNEL is not None
            and index is not None
            and index.takes_hash_lists
        ):
            request = requests[0]
            if request.transaction_type == _ROLLBACK:
                return 1
            return self._index_one(
                index, request.topic, request.keys, request.uniq_key,
                request.commit_log_offset, request.store_timestamp, resume,
            )  # fmt: skip
        if _KERNEL is not None and len(requests) >= _KERNEL_REQUESTS:
            hashes, positions, offsets, stamps = _KERNEL.index_key_table(
                list(requests), end_phy, *(resume or (-1, 0)), _ROLLBACK
            )
            if not len(positions):
                return len(requests)
            put = index.put_hashes(hashes, offsets, stamps) if index is not None else 0
            if put == len(positions):
                return len(requests)
            owners: list[int] = positions.tolist()
        else:
            keys, owners = gather_keys(requests, end_phy, resume)
            if not keys:
                return len(requests)
            put = self._put_keys(index, keys, owners, requests) if index is not None else 0
            if put == len(keys):
                return len(requests)
        # The file filled up (or there is none) at key ``put``: its request waits.
        stuck = owners[put]
        done_of_stuck = put - owners.index(stuck)
        if resume is not None and resume[0] == requests[stuck].commit_log_offset:
            done_of_stuck += resume[1]
        self._resume = (requests[stuck].commit_log_offset, done_of_stuck)
        return stuck

    def index_put(
        self, topic: str, keys: str | None, uniq_key: str | None, offset: int, stamp: int
    ) -> bool:
        """``build_index`` of a single put's record (not rolled back) given by its
        fields: the dispatcher's fields way, with no request built when the kernel
        takes it.

        Returns:
            As ``build_index``.
        """
        if not self.enabled:
            return True
        files = self._files
        index = files[-1] if files else None
        if index is None or index.is_write_full or _KERNEL is None or not index.takes_hash_lists:
            request = DispatchRequest(topic, 0, offset, 0, 0, stamp, 0, keys, uniq_key)
            return self.build_indexes([request]) == 1
        resume = self._resume
        self._resume = None
        return self._index_one(index, topic, keys, uniq_key, offset, stamp, resume) == 1

    def _index_one(  # noqa: PLR0917 - a put's fields, positional on the hot path
        self, index: IndexFile, topic: str, keys: str | None, uniq_key: str | None,
        offset: int, stamp: int, resume: tuple[int, int] | None,
    ) -> int:  # fmt: skip
        """``build_indexes`` of a single put's keys (not rolled back) into the writable
        ``index``: its key hashes from one kernel call (the hashes of ``index_keys``,
        without building them), put as lists."""
        if offset < index.end_phy_offset:
            return 1
        skip = resume[1] if resume is not None and resume[0] == offset else 0
        assert _KERNEL is not None
        hashes: list[int] = _KERNEL.request_key_hashes(topic, uniq_key, keys, skip)
        count = len(hashes)
        if not count:
            return 1
        if count <= _SCALAR_KEYS:
            put = index.put_hash_list(hashes, [offset] * count, [stamp] * count) or 0
        else:  # past the list kernel's bound: numpy's way
            owned, stamps = np.full(count, offset, np.int64), np.full(count, stamp, np.int64)
            put = index.put_hashes(np.array(hashes, np.int64), owned, stamps)
        if put == count:
            return 1
        self._resume = (offset, skip + put)  # the file filled up: the rest goes to the next
        return 0

    def _put_keys(
        self, index: IndexFile, keys: list[str], owners: list[int],
        requests: Sequence[DispatchRequest],
    ) -> int:  # fmt: skip
        """Put ``keys`` (of ``requests[owners[k]]``) into ``index``: how many went in."""
        if len(keys) <= _SCALAR_KEYS:
            return self._put_one_by_one(index, keys, owners, requests)
        owner = np.array(owners, dtype=np.int64)
        offsets = np.fromiter((r.commit_log_offset for r in requests), np.int64, len(requests))
        times = np.fromiter((r.store_timestamp for r in requests), np.int64, len(requests))
        return index.put_hashes(index_key_hashes(keys), offsets[owner], times[owner])

    @staticmethod
    def _put_one_by_one(
        index: IndexFile, keys: list[str], owners: list[int], requests: Sequence[DispatchRequest]
    ) -> int:
        """``put_key`` per key: cheaper than numpy's set-up for a handful (a single send);
        the C kernel takes them as lists when built."""
        done = index.put_hash_list(
            [index_key_hash(key) for key in keys],
            [requests[position].commit_log_offset for position in owners],
            [requests[position].store_timestamp for position in owners],
        )
        if done is not None:
            return done
        for put, (key, position) in enumerate(zip(keys, owners, strict=True)):
            request = requests[position]
            if not index.put_key(key, request.commit_log_offset, request.store_timestamp):
                return put
        return len(keys)

    def drop_beyond_blocking(self, end_offset: int) -> list[Path]:
        """Delete the newest files that index messages at or past ``end_offset`` (load
        phase, after recovery cut a torn CommitLog tail: their keys point at nothing,
        and new messages there would be taken for indexed already)."""
        deleted: list[Path] = []
        while self._files and self._files[-1].end_phy_offset >= end_offset > 0:
            index = self._files.pop()
            index.mapped.shutdown()
            index.mapped.delete_blocking()
            deleted.append(index.mapped.path)
        if deleted:
            log.warning("deleted %d index file(s) past the recovered CommitLog end", len(deleted))
        return deleted

    async def shutdown(self) -> None:
        """Stop, then flush the newest files (``flush_current``) and any other file still
        shadowed (a superseded file's flush the stop cancelled): every header and slot
        table reaches its file (``IndexFile``)."""
        await super().shutdown()
        await self.flush_current()
        for index in self._files[:-2]:
            if index.is_shadowed:
                await self._flush_held(index)

    async def _flush_held(self, index: IndexFile) -> bool:
        """Flush ``index`` in the executor while holding it; False if it is being deleted."""
        if not index.mapped.hold():
            return False
        try:
            await self._executor.run(index.flush_blocking, index.take_marks())
        finally:
            index.mapped.release()
        return True

    async def flush_current(self) -> int:
        """Flush the newest file (and the one before, whose flush may still be under way):
        a shadow's marked pages, then the msync.

        Returns:
            A store time every key up to which is now on disk (0: no file); the
            checkpoint's ``indexMsgTimestamp`` may move to it.
        """
        files = self._files[-2:]
        if not files:
            return 0
        stamp = files[-1].end_timestamp  # read before the msync: covered by it
        for index in files:
            if not await self._flush_held(index):
                return 0  # being deleted: claim nothing this time
        return stamp

    # -- new files ---------------------------------------------------------------------

    async def create_file(self) -> IndexFile:
        """Create the next file in the executor (concurrent callers share it).

        Raises:
            StoreIOError: it could not be created.
        """
        current = self.writable_file()
        if current is not None:
            return current
        if self._creating is None:
            self._creating = asyncio.get_running_loop().create_future()
            creating = self._creating
            try:
                full = self._files[-1] if self._files else None
                if full is not None and full.is_shadowed:
                    # Its last keys reach the page cache before a newer file exists: a
                    # process killed from here on has them (the replay adds keys only
                    # past the newest file's header).
                    await self._executor.run(full.write_shadow_blocking, full.take_marks())
                index = await self._executor.run(IndexFile.create_blocking, *self._next_args())
            except BaseException as exc:
                self._creating = None
                creating.set_exception(exc)
                creating.exception()
                raise
            self._creating = None
            self._add(index)
            creating.set_result(index)
            return index
        return await asyncio.shield(self._creating)

    def create_file_blocking(self) -> IndexFile:
        """Create the next file in this thread (load/recovery phase only)."""
        current = self.writable_file()
        if current is not None:
            return current
        index = IndexFile.create_blocking(*self._next_args())
        self._add(index, flush_previous=False)
        if len(self._files) > 1:
            self._files[-2].flush_blocking()
        return index

    def _next_args(self) -> tuple[Path, int, int, int, int, bool, bool]:
        name = index_file_name(self._clock.now_ms())
        end_phy = end_time = 0
        if self._files:
            last = self._files[-1]
            end_phy, end_time = last.end_phy_offset, last.end_timestamp
            if name <= last.file_name:
                # Same millisecond (or the clock went back): names must stay ordered.
                name = str(int(last.file_name) + 1)
        path = self.directory / name
        # Shadowed (the last True): the writable file's slot table takes no page faults
        # on the loop.
        return path, self.hash_slot_num, self.index_num, end_phy, end_time, self.preallocate, True

    def _add(self, index: IndexFile, *, flush_previous: bool = True) -> None:
        previous = self._files[-1] if self._files else None
        self._files.append(index)
        log.info("index file %s created", index.file_name)
        if previous is not None and flush_previous:
            self.spawn(self._flush_superseded(previous), name=f"flush:{previous.file_name}")

    async def _flush_superseded(self, index: IndexFile) -> None:
        if not await self._flush_held(index):
            return
        if index.is_write_full and self.on_file_full is not None:
            self.on_file_full(index)

    # -- query ---------------------------------------------------------------------------

    def query_offset(
        self, topic: str, key: str, max_num: int, begin: int, end: int
    ) -> QueryOffsetResult:
        """CommitLog offsets of messages with ``key`` stored in ``[begin, end]`` (ms).

        Files newest first; a file is searched when its time range overlaps the
        window; the walk stops after the first file that began before ``begin`` or
        once ``max_num`` (capped at ``maxMsgsNumBatch``) offsets are found.
        """
        max_num = min(max_num, self.max_msgs_num_batch)
        result = QueryOffsetResult([])
        full_key = f"{topic}#{key}"
        for index in reversed(self._files):
            if index is self._files[-1]:
                result.index_last_update_timestamp = index.end_timestamp
                result.index_last_update_phyoffset = index.end_phy_offset
            if index.is_time_matched(begin, end):
                budget = max_num - len(result.phy_offsets)
                result.phy_offsets.extend(index.select_phy_offsets(full_key, budget, begin, end))
            if index.begin_timestamp < begin or len(result.phy_offsets) >= max_num:
                break
        return result

    # -- expiry and end of life ------------------------------------------------------------

    def pick_expired(self, min_physical_offset: int) -> list[IndexFile]:
        """Detach the oldest files whose endPhyOffset < the CommitLog's min offset.

        Never the last file; stops at the first file it keeps. Delete the returned
        files with ``delete_files_blocking([f.mapped for f in files])``.
        """
        chosen = []
        for index in self._files[:-1]:
            if index.end_phy_offset >= min_physical_offset:
                break
            chosen.append(index)
        for index in chosen:
            index.mapped.shutdown()
        self._files = self._files[len(chosen) :]
        return chosen

    async def delete_expired(self, min_physical_offset: int) -> int:
        """``pick_expired`` and delete the files in the executor; how many went."""
        expired = self.pick_expired(min_physical_offset)
        if not expired:
            return 0
        return await self._executor.run(delete_files_blocking, [f.mapped for f in expired])

    def close(self) -> None:
        """Unmap every file (after the last build; flush first if needed)."""
        for index in self._files:
            index.mapped.shutdown()
