"""What UPDATE_BROKER_CONFIG and UPDATE_NAMESRV_CONFIG share.

Owns: reading the request's properties body (Java's ``MixAll.string2Properties``),
the ``configBlackList`` check, and merging the accepted keys into a properties file
(``merge_into_properties_file``: blocking, atomic: temp file, fsync, rename). Java's
``Configuration.persist`` rewrites the whole file from its view instead; that would
drop the keys the view does not show, so the file keeps the other keys it had
(comments are not kept).

Must not: run on an event loop (callers send the file merge to a thread) or know
which component's settings these are.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from aiorocketmq.common.properties_file import (
    format_properties_file,
    parse_properties,
    parse_properties_bytes,
)

__all__ = ["black_listed", "merge_into_properties_file", "parse_update_body"]


def parse_update_body(body: bytes | bytearray | memoryview | None) -> dict[str, str]:
    """The properties of an update request.

    Raises:
        ValueError: not UTF-8 or not properties text, or no key at all (Java's
            ``string2Properties error``).
    """
    try:
        updates = parse_properties(bytes(body or b"").decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"bad properties body: {exc}") from exc
    if not updates:
        raise ValueError("string2Properties error")
    return updates


def black_listed(keys: Iterable[str], black_list: str) -> list[str]:
    """The ``keys`` that ``black_list`` (``;``-separated, RocketMQ's form) forbids, sorted."""
    black = {k.strip() for k in black_list.split(";") if k.strip()}
    return sorted(k for k in keys if k in black)


def merge_into_properties_file(path: Path, updates: Mapping[str, str]) -> None:
    """Merge ``updates`` into the properties file at ``path`` (created, with its
    directory, when missing). Blocking."""
    current = parse_properties_bytes(path.read_bytes()) if path.exists() else {}
    current.update(updates)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # Escaped ASCII, as Properties.store writes: Java and we read back the same text.
    with open(tmp, "w", encoding="ascii") as fh:
        fh.write(format_properties_file(current))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
