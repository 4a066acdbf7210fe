"""StepPacing: how much one dispatch step may do before the loop gets a turn.

Owns: the bounds of a ``ReputMessageService`` step. A step walks records until it
has ``records`` of them or its walk deadline passes, then writes their ConsumeQueue
units and index keys, which its walk deadline does not see. So the walk gets the
share of the step's time budget that the last steps' walks took of their whole step
(``learn``): a chunk with many keys, or keys landing on cold index pages, shortens
the next walks instead of holding the loop several times the budget. Before the
store serves (the start-time replay) the budget is larger: nothing waits behind it.

Must not: decide what a step dispatches or in which order (the service does).
"""

from __future__ import annotations

from time import perf_counter
from typing import Final

__all__ = ["CHUNK_RECORDS", "StepPacing"]

CHUNK_RECORDS: Final = 1024
"""Records dispatched before the service yields to the loop: bounds the time any
put or pull waits behind a large backlog."""

_STEP_SECONDS: Final = 0.0005
"""A step's time budget while serving: the loop-lag budget, whatever records cost."""
_REPLAY_STEP_SECONDS: Final = 0.05
_REPLAY_CHUNK_RECORDS: Final = 16_384
"""Before the store serves, nothing waits behind the start-time replay: it goes in
large steps (fewer slices, scanners and index batches per record)."""
_LEARN_MIN_RECORDS: Final = 64  # steps this small say little about the ratio
_LEARN_RATE: Final = 0.25
_MAX_STEP_PER_WALK: Final = 20.0


class StepPacing:
    """A step's record cap and walk deadline (module docstring).

    Args:
        records: records per step while serving (tests use small values).
    """

    __slots__ = ("_seconds", "_serving_records", "records", "step_per_walk")

    def __init__(self, records: int = CHUNK_RECORDS) -> None:
        self.records = max(records, 1)
        self._serving_records = self.records
        self._seconds = _STEP_SECONDS
        self.step_per_walk = 2.0  # (whole step time) / (walk time), learnt

    def replaying(self, on: bool) -> None:
        """Take the start-time replay's larger steps (``on``), or the serving ones."""
        if on:
            self._seconds = _REPLAY_STEP_SECONDS
            self.records = max(self._serving_records, _REPLAY_CHUNK_RECORDS)
        else:
            self._seconds, self.records = _STEP_SECONDS, self._serving_records

    def walk_deadline(self, started: float) -> float:
        """When a step begun at ``started`` (``perf_counter``) must stop walking."""
        return started + self._seconds / self.step_per_walk

    def learn(self, started: float, walked: float, records: int) -> None:
        """A step that walked ``records`` records until ``walked`` has just ended."""
        if records >= _LEARN_MIN_RECORDS and walked > started:
            ratio = min((perf_counter() - started) / (walked - started), _MAX_STEP_PER_WALK)
            self.step_per_walk += (max(ratio, 1.0) - self.step_per_walk) * _LEARN_RATE
