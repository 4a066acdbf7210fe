"""Durable file primitives shared by every component that persists something.

Owns: fsync of a directory entry, the load of a config file with its ``.bak``
fallback (``ConfigManager.load``), and the atomic replacement of a small file
(RocketMQ's ``ConfigManager.persist`` / ``MixAll.string2File``: keep the old file as
``.bak``, write ``.tmp``, fsync, rename, fsync the directory), so that a crash leaves
either the old or the new content, never a torn one.

Must not: run on the event loop. Every function here blocks and ends in
``_blocking``: call it through ``BlockingExecutor.run`` (or in the load phase).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from aiorocketmq.common.errors import RocketMQError

__all__ = ["fsync_dir_blocking", "read_with_backup_blocking", "write_file_atomic_blocking"]

T = TypeVar("T")
log = logging.getLogger(__name__)


def fsync_dir_blocking(directory: Path) -> None:
    """Make a create, rename or unlink in ``directory`` survive a power cut."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file_atomic_blocking(path: Path, data: str | bytes, *, keep_backup: bool = True) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file.

    Args:
        path: the file to replace (its directory is created if missing).
        data: the new content; text is written as UTF-8.
        keep_backup: first copy the current file to ``<path>.bak`` (also atomically),
            as RocketMQ does, so a reader can fall back to it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if keep_backup and path.exists():
        _write_and_rename(path.with_name(path.name + ".bak"), path.read_bytes())
    _write_and_rename(path, data.encode("utf-8") if isinstance(data, str) else data)
    fsync_dir_blocking(path.parent)


def _write_and_rename(target: Path, data: bytes) -> None:
    tmp = target.with_name(target.name + ".tmp")
    with tmp.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def read_with_backup_blocking(path: Path, parse: Callable[[str], T]) -> T | None:
    """Load a config file as RocketMQ's ``ConfigManager.load`` does; runs in the executor.

    Reads ``path``; when it is missing or empty, or ``parse`` fails on it, reads
    ``<path>.bak`` instead.

    Args:
        path: The file.
        parse: Turns the text into the value; raises ``ValueError`` or
            ``RocketMQError`` (``RemoteProtocolError``...) on bad content.

    Returns:
        The parsed value, or None when neither file exists or has content.

    Raises:
        The first error met when a file has content but neither parses or reads
        (Java refuses to start then too).
    """
    first_error: Exception | None = None
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text("utf-8")
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            first_error = first_error or exc
            continue
        if not text:
            continue
        try:
            return parse(text)
        except (ValueError, RocketMQError) as exc:
            log.warning("config file unreadable path=%s error=%s", candidate, exc)
            first_error = first_error or exc
    if first_error is not None:
        raise first_error
    return None
