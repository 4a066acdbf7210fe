"""CallThreads: calls off the loop, results back in batches, blocking calls still overlap.

Real threads and a real loop; the tests wait on events and conditions, never on time.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from aiorocketmq.runtime.call_threads import CallThreads
from aiorocketmq.runtime.lifecycle import ServiceStateError
from tests.support.wait import wait_until

TIMEOUT_S = 10.0


async def test_results_and_errors_come_back_from_named_threads() -> None:
    pool = CallThreads("calls-test", 2)
    loop_thread = threading.get_ident()
    error = ValueError("listener bug")

    def where(tag: str) -> tuple[str, int, str]:
        return tag, threading.get_ident(), threading.current_thread().name

    def broken() -> None:
        raise error

    try:
        tag, ident, name = await pool.run(where, "a")
        with pytest.raises(ValueError) as raised:
            await pool.run(broken)
    finally:
        await pool.shutdown()
    assert tag == "a" and ident != loop_thread and name.startswith("calls-test_")
    assert raised.value is error  # the very exception, not a copy


async def test_a_burst_of_quick_calls_takes_one_thread_and_one_delivery() -> None:
    pool = CallThreads("calls-burst", 8)
    count = 50
    ran: list[int] = []
    threads: set[int] = set()
    last_ran = threading.Event()

    def quick(i: int) -> int:
        threads.add(threading.get_ident())
        ran.append(i)
        if len(ran) == count:
            last_ran.set()
        return i * 2

    try:
        tasks = [asyncio.create_task(pool.run(quick, i)) for i in range(count)]
        await asyncio.sleep(0)  # each task queues its call
        # Hold the loop until every call ran: nothing can be delivered meanwhile, and
        # the one awake worker must take every call (a new one is woken only for a
        # call nobody awake would take, or by the loop's look, which cannot run now).
        assert last_ran.wait(TIMEOUT_S)
        results = await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT_S)
    finally:
        await pool.shutdown()
    assert results == [i * 2 for i in range(count)]
    assert ran == list(range(count))  # in the order queued
    assert len(threads) == 1 and pool.threads == 1
    assert pool.deliveries == 1  # the loop woke once for all fifty results


async def test_blocking_calls_overlap_up_to_the_pool_size_and_no_more() -> None:
    pool = CallThreads("calls-block", 4)
    release = threading.Event()
    lock = threading.Lock()
    inside, most = 0, 0

    def blocking() -> None:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        try:
            assert release.wait(TIMEOUT_S)
        finally:
            with lock:
                inside -= 1

    try:
        tasks = [asyncio.create_task(pool.run(blocking)) for _ in range(10)]
        # One worker takes the first call and blocks; the loop's looks add workers.
        await wait_until(lambda: inside == 4, timeout=TIMEOUT_S, what="4 calls at once")
        release.set()
        await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT_S)
    finally:
        release.set()
        await pool.shutdown()
    assert most == 4 and pool.threads == 4


async def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    pool = CallThreads("calls-cancel", 1)
    release, started = threading.Event(), threading.Event()
    ran: list[str] = []

    def hold() -> None:
        started.set()
        assert release.wait(TIMEOUT_S)

    try:
        holding = asyncio.create_task(pool.run(hold))
        await wait_until(started.is_set, timeout=TIMEOUT_S, what="the only worker busy")
        skipped = asyncio.create_task(pool.run(ran.append, "skipped"))
        await asyncio.sleep(0)  # queued behind the busy worker
        skipped.cancel()
        after = asyncio.create_task(pool.run(ran.append, "after"))
        await asyncio.sleep(0)
        release.set()
        await asyncio.wait_for(asyncio.gather(holding, after), TIMEOUT_S)
    finally:
        release.set()
        await pool.shutdown()
    assert skipped.cancelled()
    assert ran == ["after"]


async def test_shutdown_drops_queued_calls_lets_running_ones_finish_and_ends_threads() -> None:
    pool = CallThreads("calls-stop", 1)
    release, started = threading.Event(), threading.Event()

    def hold() -> str:
        started.set()
        assert release.wait(TIMEOUT_S)
        return "finished"

    running = asyncio.create_task(pool.run(hold))
    await wait_until(started.is_set, timeout=TIMEOUT_S, what="the worker busy")
    queued = asyncio.create_task(pool.run(str, "never"))
    await asyncio.sleep(0)
    await pool.shutdown()
    await pool.shutdown()  # idempotent
    with pytest.raises(asyncio.CancelledError):
        await queued
    release.set()
    assert await asyncio.wait_for(running, TIMEOUT_S) == "finished"
    workers = [t for t in threading.enumerate() if t.name.startswith("calls-stop_")]
    await wait_until(
        lambda: not any(t.is_alive() for t in workers), timeout=TIMEOUT_S, what="threads ended"
    )
    with pytest.raises(ServiceStateError):
        await pool.run(str, "late")


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="max_workers"):
        CallThreads("x", 0)
    with pytest.raises(ValueError, match="name"):
        CallThreads("", 1)


async def test_submit_calls_back_on_the_loop_and_not_for_dropped_calls() -> None:
    pool = CallThreads("calls-submit", 1)
    loop_thread = threading.get_ident()
    release, started = threading.Event(), threading.Event()
    got: list[tuple[bool, object, bool]] = []
    all_back = asyncio.Event()
    error = KeyError("k")

    def back(ok: bool, value: object) -> None:
        got.append((ok, value, threading.get_ident() == loop_thread))
        if len(got) == 2:
            all_back.set()

    def hold() -> str:
        started.set()
        assert release.wait(TIMEOUT_S)
        return "held"

    def broken() -> None:
        raise error

    try:
        pool.submit(str.upper, ("a",), back)
        pool.submit(broken, (), back)
        await wait_until(all_back, timeout=TIMEOUT_S, what="two results back")
        pool.submit(hold, (), back)
        await wait_until(started.is_set, timeout=TIMEOUT_S, what="the worker busy")
        pool.submit(str.upper, ("dropped",), back)  # queued behind it, then dropped
    finally:
        await pool.shutdown()
        release.set()
    assert got[:2] == [(True, "A", True), (False, error, True)]
    with pytest.raises(ServiceStateError):
        pool.submit(str.upper, ("late",), back)
    # The running call's result may still come back; the dropped one's never does.
    assert all(value != "DROPPED" for _ok, value, _on_loop in got)


async def test_a_callback_that_raises_does_not_strand_the_other_results(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pool = CallThreads("calls-cb", 1)
    release = threading.Event()
    got: list[object] = []
    both = asyncio.Event()

    def bad(ok: bool, value: object) -> None:
        raise RuntimeError("caller bug")

    def good(ok: bool, value: object) -> None:
        got.append(value)
        both.set()

    def first() -> str:
        assert release.wait(TIMEOUT_S)
        return "first"

    try:
        with caplog.at_level(logging.ERROR, "aiorocketmq.runtime.call_threads"):
            pool.submit(first, (), bad)
            pool.submit(str, ("second",), good)  # queued: both finish before the loop looks
            release.set()
            await wait_until(both, timeout=TIMEOUT_S, what="the second result")
    finally:
        await pool.shutdown()
    assert got == ["second"]
    assert any("callback raised" in r.getMessage() for r in caplog.records)
