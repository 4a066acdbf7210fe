"""A pull's scan over its ConsumeQueue units as arrays, and one hold for its records.

Owns: ``scan_units``, the vectorised twin of ``MessageGetter``'s per-unit scan, for
pulls without a CommitLog-level filter that may visit ``WORTH_UNITS`` units or more.
Over the unit slice at once (in C, ``_scan_kernels.pyx``, when built; numpy in
``py_scan_cut``, the reference): the tag mask, RocketMQ's ``isTheBatchFull`` cut
(``count >= maxMsgNums``, or the in-memory / on-disk byte and count limits, each unit
judged by how far behind the CommitLog end it is, checked before the unit's own tag
test), then one held slice of the CommitLog from the first chosen record to the end of
the last, the records views into it (``GetMessageResult.add_run``).

Must not: answer differently from the per-unit scan. Whenever the chosen records are
not all readable in one CommitLog file (a file expired or not yet written that far,
a file boundary), it returns None and the per-unit scan, which knows the
MESSAGE_WAS_REMOVING and skip-the-file rules, takes the pull.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final

import numpy as np

from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.store.commit_log import CommitLog
from aiorocketmq.store.consume_queue import UnitSlice, tags_match
from aiorocketmq.store.results import GetMessageResult, GetMessageStatus

__all__ = ["WORTH_UNITS", "ScanCut", "py_scan_cut", "scan_units"]

_KERNEL = load_kernel("aiorocketmq.store._scan_kernels")

WORTH_UNITS: Final = 1 if _KERNEL is not None else 24
"""Units a pull must be able to visit before this scan pays. The numpy steps cost about
18 µs whatever the pull's size, the per-unit scan about 0.9 µs a unit (2.6 µs for the
one new message a long poll woke for): 24. The C cut costs a 1-unit pull 4.5 µs to the
per-unit scan's 5.0 and a 32-unit one 5.6 to 40: every pull."""

_S = GetMessageStatus


#: ``(cut, last_pulled, queue_offsets, starts, sizes, run_start, run_end, total,
#: segments)`` of a pull's units (``py_scan_cut``), or None.
ScanCut = tuple[int, int, list[int], list[int], list[int], int, int, int, list[tuple[int, int]]]


def scan_units(
    units: UnitSlice,
    max_msgs: int,
    tag_codes: Collection[int] | None,
    commit_log: CommitLog,
    *,
    memory_threshold: int,
    memory_limits: tuple[int, int],
    disk_limits: tuple[int, int],
) -> GetMessageResult | None:
    """The scan's result, or None when the per-unit scan must decide (docstring)."""
    max_offset = commit_log.max_offset
    first = units.first_queue_offset
    args = (first, tag_codes or None, max_msgs, max_offset, memory_threshold,
            *memory_limits, *disk_limits)  # fmt: skip
    scanned = (
        _KERNEL.scan_units(units.units, *args)
        if _KERNEL is not None and units.units.flags.c_contiguous
        else py_scan_cut(units.units, *args)
    )
    if scanned is None:
        return None
    cut, last_pulled, queue_offsets, starts, sizes, run_start, run_end, total, segments = scanned
    result = GetMessageResult(_S.NO_MATCHED_MESSAGE)
    if starts:
        run = commit_log.get_message(run_start, run_end - run_start)
        if run is None:
            return None  # not all readable in one file: the per-unit scan decides
        result.add_run(run, starts, sizes, total, segments)
        result.message_queue_offsets = queue_offsets
        result.status = _S.FOUND
    result.next_begin_offset = first + cut
    result.suggest_pulling_from_slave = max_offset - last_pulled > memory_threshold
    return result


def py_scan_cut(  # noqa: PLR0917 - the kernel's positional signature
    array: np.ndarray[Any, Any],
    first: int,
    tag_codes: Collection[int] | None,
    max_msgs: int,
    max_offset: int,
    memory_threshold: int,
    memory_bytes: int,
    memory_count: int,
    disk_bytes: int,
    disk_count: int,
) -> ScanCut | None:
    """The reference of the kernel's ``scan_units``: the cut of ``array`` (units from
    queue offset ``first``), the chosen records and the segments of back-to-back ones;
    None when the slice is empty or holds a size <= 0."""
    offsets = array["offset"].astype(np.int64)
    sizes = array["size"].astype(np.int64)
    if not len(offsets) or int(sizes.min()) <= 0:
        return None
    matched = tags_match(array, tag_codes) if tag_codes else np.ones(len(offsets), dtype=bool)
    cut = _batch_cut(offsets, sizes, matched, max_msgs, max_offset, memory_threshold,
                     (memory_bytes, memory_count), (disk_bytes, disk_count))  # fmt: skip
    chosen = np.flatnonzero(matched[:cut])
    last_pulled = int(offsets[min(cut, len(offsets) - 1)])
    starts, ends = offsets[chosen], offsets[chosen] + sizes[chosen]
    segments: list[tuple[int, int]] = []
    run_start = run_end = 0
    if len(chosen):
        run_start, run_end = int(starts.min()), int(ends.max())
        # A segment begins where a record does not follow the one before.
        breaks = np.flatnonzero(starts[1:] != ends[:-1]) + 1
        firsts = np.concatenate(([0], breaks)).tolist()
        lasts = np.concatenate((breaks - 1, [len(chosen) - 1])).tolist()
        begins, finishes = starts.tolist(), ends.tolist()
        segments = [(begins[i], finishes[j]) for i, j in zip(firsts, lasts, strict=True)]
    return (
        cut, last_pulled, (chosen + first).tolist(), starts.tolist(), sizes[chosen].tolist(),
        run_start, run_end, int(sizes[chosen].sum()), segments,
    )  # fmt: skip


def _batch_cut(  # noqa: PLR0917 - the batch rule's inputs, named as the scan's
    offsets: np.ndarray[Any, Any],
    sizes: np.ndarray[Any, Any],
    matched: np.ndarray[Any, Any],
    max_msgs: int,
    max_offset: int,
    memory_threshold: int,
    memory_limits: tuple[int, int],
    disk_limits: tuple[int, int],
) -> int:
    """The first unit at which the batch is full (it is not consumed), or all of them.

    For each unit, with ``count``/``total`` the records and bytes chosen before it:
    full when ``count > 0`` and (``count >= max_msgs`` or ``total + size > max_bytes``
    or ``count > max_count - 1``), the limits being the on-disk ones for a unit more
    than ``memory_threshold`` bytes behind the CommitLog end.
    """
    taken = matched.astype(np.int64)
    count = np.cumsum(taken) - taken
    total = np.cumsum(sizes * taken) - sizes * taken
    on_disk = (max_offset - offsets) > memory_threshold
    max_bytes = np.where(on_disk, disk_limits[0], memory_limits[0])
    max_count = np.where(on_disk, disk_limits[1], memory_limits[1])
    full = (count > 0) & (
        (count >= max_msgs) | (total + sizes > max_bytes) | (count > max_count - 1)
    )
    hits = np.flatnonzero(full)
    return int(hits[0]) if len(hits) else len(offsets)
