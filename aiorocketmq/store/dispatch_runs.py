"""Dispatch by runs: a reput chunk's ConsumeQueue units per queue, its arrivals per queue.

Owns: grouping one dispatch chunk's ``DispatchRequest``s (CommitLog order) into a
run of units per ConsumeQueue, written with ``ConsumeQueue.put_run`` (one append
per queue where the run continues the queue), and choosing the chunk's arrival
notices: the newest record of each (topic, queue id, tagsCode).

Must not: walk the CommitLog, touch the index or the checkpoint, or call listeners
(the dispatcher does all of these with what is returned here).

Why one notice per (queue, tagsCode) loses nothing: a held pull wakes for a record
whose queue offset + 1 exceeds its pull offset and whose tagsCode it takes, and for
each tagsCode the newest record is the one with the largest queue offset.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final

from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.store.consume_queue import ConsumeQueue
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.dispatch_request import DispatchRequest, kernel_answer

__all__ = [
    "RunsOutcome", "group_runs", "newest_arrivals", "put_runs", "py_group_runs",
    "py_newest_arrivals",
]  # fmt: skip

_QueueKey = tuple[str, int]
_NO_UNIT: Final = int(MessageSysFlag.TRANSACTION_PREPARED_TYPE)
"""The bit only PREPARED (4) and ROLLBACK (12) records have: ``not builds_consume_queue``."""


@dataclass(slots=True)
class RunsOutcome:
    """What ``put_runs`` did.

    Attributes:
        newest: the last record whose unit was written (OK), in CommitLog order.
        need: the first record, in CommitLog order, whose unit waits for a file.
        need_queue: the queue of ``need``.
        failed: records whose unit write failed (ERROR).
    """

    newest: DispatchRequest | None = None
    need: DispatchRequest | None = None
    need_queue: ConsumeQueue | None = None
    failed: list[DispatchRequest] = field(default_factory=list)


def put_runs(table: ConsumeQueueTable, requests: Sequence[DispatchRequest]) -> RunsOutcome:
    """Write the units of ``requests`` (one chunk, CommitLog order), one run per queue.

    A queue's run stops at its first unit that needs a file; units of other queues
    past that record are written anyway (a redo of them is a duplicate, a no-op).
    """
    outcome = RunsOutcome()
    for (topic, queue_id), run in group_runs(requests).items():
        queue = table.find_or_create(topic, queue_id)
        result = queue.put_run(run)
        outcome.failed.extend(run[i] for i in result.failed)
        if result.last_ok >= 0:
            ok = run[result.last_ok]
            newest = outcome.newest
            if newest is None or ok.commit_log_offset > newest.commit_log_offset:
                outcome.newest = ok
        if result.done < len(run):
            waiting = run[result.done]
            need = outcome.need
            if need is None or waiting.commit_log_offset < need.commit_log_offset:
                outcome.need, outcome.need_queue = waiting, queue
    return outcome


def group_runs(requests: Sequence[DispatchRequest]) -> dict[_QueueKey, list[DispatchRequest]]:
    """The requests that get a unit, per (topic, queue id), in CommitLog order (C when
    built: ``store/_dispatch_kernels.pyx``)."""
    runs = kernel_answer("group_runs", requests, _NO_UNIT)
    return py_group_runs(requests) if runs is NotImplemented else runs


def py_group_runs(requests: Sequence[DispatchRequest]) -> dict[_QueueKey, list[DispatchRequest]]:
    """``group_runs`` in Python: the reference."""
    runs: dict[_QueueKey, list[DispatchRequest]] = {}
    for request in requests:
        if not request.sys_flag & _NO_UNIT:
            run = runs.get((request.topic, request.queue_id))
            if run is None:
                runs[(request.topic, request.queue_id)] = [request]
            else:
                run.append(request)
    return runs


def newest_arrivals(requests: Sequence[DispatchRequest]) -> Collection[DispatchRequest]:
    """The newest record of each (topic, queue id, tagsCode) among ``requests`` (C when
    built)."""
    newest = kernel_answer("newest_arrivals", requests)
    return py_newest_arrivals(requests) if newest is NotImplemented else newest


def py_newest_arrivals(requests: Sequence[DispatchRequest]) -> Collection[DispatchRequest]:
    """``newest_arrivals`` in Python: the reference."""
    newest: dict[tuple[str, int, int], DispatchRequest] = {}
    for request in requests:
        key = (request.topic, request.queue_id, request.tags_code)
        seen = newest.get(key)
        if seen is None or seen.consume_queue_offset <= request.consume_queue_offset:
            newest[key] = request
    return newest.values()
