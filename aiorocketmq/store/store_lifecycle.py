"""The store's load phase and its marker files: ``lock``, ``abort``, and host memory.

Owns: taking and releasing ``<root>/lock`` (an exclusive lock on byte 0 holding
the 4 ASCII bytes ``lock``: a second store on the same directory, here or in a Java
broker, refuses to start), the ``abort`` marker (present while running, so its
presence at load means the last exit was a crash), the load order of
``DefaultMessageStore.load`` (specs/store.md §7.2) ending in recovery, and the
host's total physical memory (``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``).

Must not: run on the event loop (everything here ends in ``_blocking`` and runs in
the store's executor), or decide recovery (``recovery.py`` does).

Lock kind. RocketMQ's ``FileChannel.tryLock`` is a POSIX record lock. Those never
conflict inside one process, so two stores in one process could share a
directory. We take an open-file-description lock (``F_OFD_SETLK``, Linux), which
conflicts with POSIX locks held by other processes (a Java broker) *and* with a
second open of the file in this process; ``flock`` is the fallback elsewhere.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from aiorocketmq.runtime.files import fsync_dir_blocking
from aiorocketmq.store.checkpoint import StoreCheckpoint
from aiorocketmq.store.commit_log import CommitLog
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.errors import StoreIOError, StoreLockedError
from aiorocketmq.store.index_service import IndexService
from aiorocketmq.store.recovery import RecoveryReport, recover_blocking

__all__ = [
    "DEFAULT_TOTAL_PHYSICAL_MEMORY",
    "LoadResult",
    "acquire_lock_blocking",
    "create_abort_file_blocking",
    "delete_abort_file_blocking",
    "load_store_blocking",
    "release_lock_blocking",
    "total_physical_memory",
]

log = logging.getLogger(__name__)

DEFAULT_TOTAL_PHYSICAL_MEMORY: Final = 24 * 1024 * 1024 * 1024
"""What RocketMQ assumes when the OS does not say (``StoreUtil``)."""

_LOCK_CONTENT: Final = b"lock"
# struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
# (native alignment, padded to the C struct's size).
_FLOCK: Final = struct.Struct("hhqqixxxx")


def total_physical_memory() -> int:
    """Total RAM in bytes, or 24 GiB when the OS does not tell."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        page_size = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return DEFAULT_TOTAL_PHYSICAL_MEMORY
    if pages <= 0 or page_size <= 0:
        return DEFAULT_TOTAL_PHYSICAL_MEMORY
    return int(pages * page_size)


# -- lock ----------------------------------------------------------------------------


def acquire_lock_blocking(path: Path) -> int:
    """Lock byte 0 of ``path`` exclusively and write ``lock`` into it.

    Returns:
        The open descriptor; the lock lives as long as it stays open.

    Raises:
        StoreLockedError: another store holds the lock.
        StoreIOError: the file could not be opened or written.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreIOError(f"cannot open lock file {path}: {exc}") from exc
    try:
        _lock_first_byte(fd)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EACCES, errno.EAGAIN, errno.EWOULDBLOCK):
            raise StoreLockedError(f"lock failed, store already started: {path}") from exc
        raise StoreIOError(f"cannot lock {path}: {exc}") from exc
    try:
        os.pwrite(fd, _LOCK_CONTENT, 0)
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        raise StoreIOError(f"cannot write lock file {path}: {exc}") from exc
    return fd


def _lock_first_byte(fd: int) -> None:
    ofd_setlk = getattr(fcntl, "F_OFD_SETLK", None)
    if ofd_setlk is None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    # l_pid must be 0 for an open-file-description lock.
    fcntl.fcntl(fd, ofd_setlk, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))


def release_lock_blocking(fd: int) -> None:
    """Close the lock file's descriptor (which drops the lock)."""
    os.close(fd)


# -- abort marker -------------------------------------------------------------------


def create_abort_file_blocking(path: Path) -> None:
    """Create the empty ``abort`` marker and make its directory entry durable."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    os.close(fd)
    fsync_dir_blocking(path.parent)


def delete_abort_file_blocking(path: Path) -> bool:
    """Delete the ``abort`` marker (clean shutdown); False if it was not there."""
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    fsync_dir_blocking(path.parent)
    return True


# -- load ----------------------------------------------------------------------------


@dataclass(slots=True)
class LoadResult:
    """What the load phase found.

    Attributes:
        last_exit_ok: no ``abort`` file was there (clean shutdown).
        report: what recovery kept and cut.
        consume_queues: ConsumeQueue directories loaded.
        deleted_index_files: index files dropped after a crash (rebuilt by redispatch).
    """

    last_exit_ok: bool
    report: RecoveryReport
    consume_queues: int = 0
    deleted_index_files: list[Path] = field(default_factory=list)


def load_store_blocking(
    config: MessageStoreConfig,
    commit_log: CommitLog,
    cq_table: ConsumeQueueTable,
    index_service: IndexService,
    checkpoint: StoreCheckpoint,
) -> LoadResult:
    """``DefaultMessageStore.load``: files, checkpoint, index, then recovery.

    Runs in the executor before anything else touches these objects. ``checkpoint``
    is filled from its file in place (the services already hold it).

    Raises:
        StoreLoadError: a file does not have the shape a 4.9 store gives it.
    """
    last_exit_ok = not config.abort_path.exists()
    log.info("last shutdown %s", "normally" if last_exit_ok else "abnormally")
    for directory in (config.commit_log_dir, config.consume_queue_dir):
        directory.mkdir(parents=True, exist_ok=True)
    commit_log.load_blocking()
    queues = cq_table.load_blocking()
    stored = StoreCheckpoint.load_blocking(config.checkpoint_path)
    checkpoint.physic_msg_timestamp = stored.physic_msg_timestamp
    checkpoint.logics_msg_timestamp = stored.logics_msg_timestamp
    checkpoint.index_msg_timestamp = stored.index_msg_timestamp
    deleted = index_service.load_blocking(last_exit_ok, checkpoint.index_msg_timestamp)
    report = recover_blocking(config, commit_log, cq_table, checkpoint, last_exit_ok=last_exit_ok)
    if not last_exit_ok:
        deleted += index_service.drop_beyond_blocking(report.commit_log_end_offset)
    return LoadResult(last_exit_ok, report, queues, deleted)
