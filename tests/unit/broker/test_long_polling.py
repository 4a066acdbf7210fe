"""PullRequestHoldService: wake on arrival, tag filter, timeout sweep, close, bound."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest

from aiorocketmq.broker.long_polling import (
    LONG_POLLING_SWEEP_MS,
    HeldPull,
    HoldLimitExceededError,
    PullRequestHoldService,
)
from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.tag_hash import java_string_hash
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(30)

TAG_A = java_string_hash("TagA")
TAG_B = java_string_hash("TagB")


class Harness:
    def __init__(self, **kwargs: object) -> None:
        self.clock = ManualClock()
        self.max_offsets: dict[tuple[str, int], int] = {}
        self.reruns: list[HeldPull] = []
        self.service = PullRequestHoldService(
            clock=self.clock,
            max_offset=lambda t, q: self.max_offsets.get((t, q), 0),
            rerun=self._rerun,
            **kwargs,  # type: ignore[arg-type]
        )

    def _rerun(self, held: HeldPull) -> Awaitable[RemotingCommand | None]:
        self.reruns.append(held)  # recorded when the service starts the re-run
        return self._reply(held)

    @staticmethod
    async def _reply(held: HeldPull) -> RemotingCommand | None:
        return held.request.response_to(0, "rerun")

    def hold(
        self,
        channel: object = "conn",
        *,
        offset: int = 0,
        timeout_ms: int = 15_000,
        tags: frozenset[int] | None = None,
        queue_id: int = 0,
    ) -> HeldPull:
        return self.service.suspend(
            RemotingCommand(code=11, opaque=len(self.reruns) + 7),
            channel,
            topic="T",
            queue_id=queue_id,
            pull_from_offset=offset,
            timeout_ms=timeout_ms,
            tag_codes=tags,
        )


async def test_arrival_wakes_in_the_same_loop_iteration() -> None:
    h = Harness()
    held = h.hold(tags=frozenset({TAG_A}))
    loop = asyncio.get_running_loop()
    start = loop.time()
    h.service.on_arrival("T", 0, 1, TAG_A, 0, {})
    assert h.reruns == [held]  # started synchronously inside the listener
    reply = await asyncio.wait_for(held.future, 1.0)
    assert reply is not None and reply.remark == "rerun" and reply.opaque == held.request.opaque
    assert loop.time() - start < 0.05
    assert h.service.held_count == 0


async def test_non_matching_tag_does_not_wake() -> None:
    h = Harness()
    held = h.hold(tags=frozenset({TAG_A}))
    h.service.on_arrival("T", 0, 1, TAG_B, 0, {})
    h.service.on_arrival("T", 1, 1, TAG_A, 0, {})  # another queue
    await asyncio.sleep(0)
    assert not held.future.done() and h.reruns == []
    assert h.service.held_count == 1
    h.service.on_arrival("T", 0, 2, TAG_A, 0, {})
    assert await asyncio.wait_for(held.future, 1.0) is not None


async def test_arrival_below_requested_offset_does_not_wake() -> None:
    h = Harness()
    held = h.hold(offset=5)
    h.service.on_arrival("T", 0, 5, TAG_A, 0, {})
    assert h.reruns == [] and not held.future.done()
    h.service.on_arrival("T", 0, 6, TAG_A, 0, {})
    assert h.reruns == [held]
    await asyncio.wait_for(held.future, 1.0)


async def test_timeout_answers_after_hold_time_by_sweep() -> None:
    h = Harness()
    held = h.hold(timeout_ms=15_000)
    h.clock.advance(14_999)
    assert h.service.check_hold_requests() == 0
    assert not held.future.done()
    h.clock.advance(1)
    assert h.service.check_hold_requests() == 1
    reply = await asyncio.wait_for(held.future, 1.0)
    assert reply is not None and h.reruns == [held]
    assert h.service.check_hold_requests() == 0


async def test_sweep_wakes_when_data_appeared_without_notification() -> None:
    h = Harness()
    held = h.hold(tags=frozenset({TAG_A}))
    h.max_offsets["T", 0] = 3
    assert h.service.check_hold_requests() == 1  # tag unknown in a sweep: re-run
    await asyncio.wait_for(held.future, 1.0)


async def test_connection_close_drops_its_pulls() -> None:
    h = Harness()
    mine, other = h.hold("a"), h.hold("b", queue_id=1)
    assert h.service.on_channel_closed("a") == 1
    assert mine.future.done() and mine.future.result() is None
    assert h.service.held_count == 1
    h.service.on_arrival("T", 0, 1, TAG_A, 0, {})
    h.service.on_arrival("T", 1, 1, TAG_A, 0, {})
    assert h.reruns == [other]
    await asyncio.wait_for(other.future, 1.0)


async def test_bound_rejects_with_clear_error() -> None:
    h = Harness(max_held=2)
    h.hold()
    h.hold()
    with pytest.raises(HoldLimitExceededError, match="too many held pulls"):
        h.hold()
    h.service.on_arrival("T", 0, 1, 0, 0, {})
    assert h.service.held_count == 0
    h.hold()  # room again


async def test_cancelled_waiter_is_not_rerun() -> None:
    h = Harness()
    held = h.hold()
    held.future.cancel()
    h.service.on_arrival("T", 0, 1, 0, 0, {})
    assert h.reruns == [] and h.service.held_count == 0


async def test_rerun_error_reaches_the_waiter() -> None:
    clock = ManualClock()

    async def broken(held: HeldPull) -> RemotingCommand | None:
        raise RuntimeError("store gone")

    service = PullRequestHoldService(clock=clock, max_offset=lambda t, q: 0, rerun=broken)
    held = service.suspend(
        RemotingCommand(code=11),
        "c",
        topic="T",
        queue_id=0,
        pull_from_offset=0,
        timeout_ms=1,
        tag_codes=None,
    )
    clock.advance(1)
    service.check_hold_requests()
    with pytest.raises(RuntimeError, match="store gone"):
        await asyncio.wait_for(held.future, 1.0)


def test_hold_and_sweep_intervals() -> None:
    long_on = Harness().service
    assert long_on.sweep_interval_ms == LONG_POLLING_SWEEP_MS
    assert long_on.hold_time_ms(15_000) == 15_000
    short = Harness(long_polling_enable=False, short_polling_ms=1_000).service
    assert short.sweep_interval_ms == 1_000 and short.hold_time_ms(15_000) == 1_000


async def test_service_sweeps_periodically_and_answers_nothing_at_shutdown() -> None:
    h = Harness(long_polling_enable=False, short_polling_ms=10)
    await h.service.start()
    try:
        held = h.hold(timeout_ms=0)
        await wait_until(held.future.done, timeout=5.0, what="sweep re-run")
        assert h.reruns == [held]
        pending = h.hold(timeout_ms=60_000)
    finally:
        await h.service.shutdown()
    assert pending.future.done() and pending.future.result() is None


async def test_arrival_listener_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    def broken_max(topic: str, queue_id: int) -> int:
        raise OSError("queue file gone")

    async def never(held: HeldPull) -> RemotingCommand | None:
        raise AssertionError("not re-run")

    service = PullRequestHoldService(clock=ManualClock(), max_offset=broken_max, rerun=never)
    held = service.suspend(
        RemotingCommand(code=11),
        "c",
        topic="T",
        queue_id=0,
        pull_from_offset=5,
        timeout_ms=15_000,
        tag_codes=None,
    )
    service.on_arrival("T", 0, 1, 0, 0, {})  # 1 <= 5: re-reads the max offset, which fails
    assert "max offset of T@0 failed" in caplog.text
    assert not held.future.done() and service.held_count == 1
    assert service.check_hold_requests() == 0  # the sweep logs and goes on too
    assert service.held_count == 1
    assert service.drop_all() == 1 and held.future.result() is None
