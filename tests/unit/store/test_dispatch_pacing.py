"""StepPacing: the walk of a dispatch step gets the share of the step budget that
walks took of their whole steps; the replay takes larger steps."""

from __future__ import annotations

from time import perf_counter

from aiorocketmq.store.dispatch_pacing import CHUNK_RECORDS, StepPacing


def _step(pacing: StepPacing, walk_s: float, records: int = 1000) -> None:
    """A step that just ended: its walk took ``walk_s``, its units and keys 3x that."""
    now = perf_counter()
    pacing.learn(now - walk_s * 4, now - walk_s * 3, records)  # tail = 3x the walk


def test_a_step_whose_tail_outweighs_its_walk_shortens_the_next_walks() -> None:
    pacing = StepPacing()
    start = 100.0
    budget = (pacing.walk_deadline(start) - start) * pacing.step_per_walk
    first = pacing.walk_deadline(start) - start
    for _ in range(20):
        _step(pacing, 0.001)
    later = pacing.walk_deadline(start) - start
    assert 3.5 < pacing.step_per_walk <= 4.2  # the whole step took ~4x its walk
    assert later < first and abs(later - budget / pacing.step_per_walk) < 1e-12


def test_small_steps_teach_nothing_and_the_ratio_is_bounded() -> None:
    pacing = StepPacing()
    before = pacing.step_per_walk
    _step(pacing, 0.001, records=10)
    assert pacing.step_per_walk == before
    now = perf_counter()
    for _ in range(50):
        pacing.learn(now - 10.0, now - 10.0 + 1e-9, 1000)  # a walk of nothing
    assert pacing.step_per_walk <= 20.0


def test_the_replay_takes_larger_steps_then_serving_ones_again() -> None:
    pacing = StepPacing(3)
    assert pacing.records == 3
    pacing.replaying(True)
    assert pacing.records == 16_384
    assert pacing.walk_deadline(0.0) > 0.01  # 50 ms, shared as learnt
    pacing.replaying(False)
    assert pacing.records == 3 and pacing.walk_deadline(0.0) < 0.001
    assert StepPacing().records == CHUNK_RECORDS
