"""ListenerRunner: where a listener runs and what its answer means.

The table in ``aiorocketmq.client.listener``'s docstring, row by row, plus the
threads: a ``def`` listener runs on the consumer's pool (never the loop's thread),
an ``async def`` one on the loop, and ``threaded=False`` keeps a ``def`` one there.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyStatus,
    InvalidArgumentError,
    MessageExt,
)
from aiorocketmq.client.listener import ListenerRunner, is_async_listener
from tests.support.wait import wait_until

OK = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
SUCCESS = ConsumeOrderlyStatus.SUCCESS
SUSPEND = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT


def concurrent(
    listener: object, threaded: bool | None = None
) -> ListenerRunner[ConsumeConcurrentlyStatus]:
    return ListenerRunner(listener, ConsumeConcurrentlyStatus, "CG", 4, threaded)  # type: ignore[arg-type]


def orderly(listener: object) -> ListenerRunner[ConsumeOrderlyStatus]:
    return ListenerRunner(listener, ConsumeOrderlyStatus, "CG", 4)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(None, OK), (OK, OK), (LATER, LATER), (SUCCESS, OK), (SUSPEND, LATER)],
)
async def test_concurrent_answers(answer: object, expected: ConsumeConcurrentlyStatus) -> None:
    runner = concurrent(lambda msgs, ctx: answer)
    try:
        assert await runner.call([], None) is expected
    finally:
        await runner.shutdown()


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(None, SUCCESS), (SUCCESS, SUCCESS), (SUSPEND, SUSPEND), (OK, SUCCESS), (LATER, SUSPEND)],
)
async def test_orderly_answers(answer: object, expected: ConsumeOrderlyStatus) -> None:
    async def listener(msgs: list[MessageExt], ctx: object) -> object:
        return answer

    runner = orderly(listener)
    assert await runner.call([], None) is expected


async def test_raising_means_consume_again_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def broken(msgs: list[MessageExt], ctx: object) -> None:
        raise RuntimeError("listener bug")

    runner, ordered = concurrent(broken), orderly(broken)
    try:
        with caplog.at_level(logging.ERROR, "aiorocketmq.client.listener"):
            assert await runner.call([], None) is LATER
            assert await ordered.call([], None) is SUSPEND
    finally:
        await runner.shutdown()
        await ordered.shutdown()
    assert sum("listener raised" in r.getMessage() for r in caplog.records) == 2


async def test_other_values_are_success_with_one_warning_per_consumer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The new user: ``lambda msgs, ctx: 0`` sent every message back.
    runner = concurrent(lambda msgs, ctx: 0, threaded=False)
    with caplog.at_level(logging.WARNING, "aiorocketmq.client.listener"):
        for _ in range(5):
            assert await runner.call([], None) is OK
        assert runner.status_of(True) is OK and runner.status_of("done") is OK
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "returned 0 (int)" in warnings[0] and "CONSUME_SUCCESS" in warnings[0]
    assert "RECONSUME_LATER" in warnings[0]  # says how to ask for a retry
    other = concurrent(lambda msgs, ctx: 0, threaded=False)  # another consumer warns again
    with caplog.at_level(logging.WARNING, "aiorocketmq.client.listener"):
        await other.call([], None)
    assert sum(r.levelno == logging.WARNING for r in caplog.records) == 2


async def test_def_listeners_run_on_the_pool_async_ones_on_the_loop() -> None:
    loop_thread = threading.get_ident()
    seen: dict[str, tuple[int, str]] = {}

    def sync(msgs: list[MessageExt], ctx: object) -> None:
        seen["sync"] = (threading.get_ident(), threading.current_thread().name)

    def on_loop(msgs: list[MessageExt], ctx: object) -> None:
        seen["on_loop"] = (threading.get_ident(), threading.current_thread().name)

    class AsyncCallable:
        async def __call__(self, msgs: list[MessageExt], ctx: object) -> None:
            seen["async"] = (threading.get_ident(), threading.current_thread().name)

    runners = [concurrent(sync), concurrent(on_loop, threaded=False), concurrent(AsyncCallable())]
    try:
        for runner in runners:
            assert await runner.call([], None) is OK
    finally:
        for runner in runners:
            await runner.shutdown()
    assert [r.threaded for r in runners] == [True, False, False]
    assert seen["sync"][0] != loop_thread
    assert seen["sync"][1].startswith("ConsumeMessageThread_CG")
    assert seen["on_loop"][0] == loop_thread and seen["async"][0] == loop_thread


async def test_blocking_def_listeners_overlap_up_to_the_pool_size() -> None:
    inside, most = 0, 0
    lock = threading.Lock()

    def slow(msgs: list[MessageExt], ctx: object) -> None:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.04)
        with lock:
            inside -= 1

    runner = concurrent(slow)  # 4 threads
    try:
        results = await asyncio.gather(*(runner.call([], None) for _ in range(8)))
    finally:
        await runner.shutdown()
    assert results == [OK] * 8
    # The pool's size: 4 calls at once, never more. On the loop (as before) they
    # ran one after the other, the loop blocked all the while.
    assert most == 4


async def test_async_listener_detection_and_threaded_true_refused() -> None:
    async def handler(msgs: list[MessageExt], ctx: object, extra: int) -> None:
        return None

    assert is_async_listener(functools.partial(handler, extra=1))
    assert not is_async_listener(lambda msgs, ctx: None)
    with pytest.raises(InvalidArgumentError, match="event loop"):
        concurrent(functools.partial(handler, extra=1), threaded=True)


class Answers:
    """``submit``'s callbacks, one per context, and an event once ``expected`` came."""

    def __init__(self, expected: int) -> None:
        self.by_context: dict[str, ConsumeConcurrentlyStatus] = {}
        self.all_came = asyncio.Event()
        self._expected = expected

    def done_for(self, ctx: str) -> Callable[[ConsumeConcurrentlyStatus], None]:
        def done(status: ConsumeConcurrentlyStatus) -> None:
            self.by_context[ctx] = status
            if len(self.by_context) == self._expected:
                self.all_came.set()

        return done


async def test_submit_answers_by_callback_and_skips_when_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[str] = []

    def listener(msgs: list[MessageExt], ctx: object) -> object:
        calls.append(str(ctx))
        if ctx == "raise":
            raise RuntimeError("listener bug")
        return LATER if ctx == "later" else None

    runner = concurrent(listener)
    answers = Answers(3)
    try:
        with caplog.at_level(logging.ERROR, "aiorocketmq.client.listener"):
            runner.submit([], "skipped", answers.done_for("skipped"), lambda: True)
            for ctx in ("ok", "later", "raise"):
                runner.submit([], ctx, answers.done_for(ctx), lambda: False)
            await wait_until(answers.all_came, timeout=10, what="three answers")
    finally:
        await runner.shutdown()
    assert answers.by_context == {"ok": OK, "later": LATER, "raise": LATER}
    assert "skipped" not in calls  # neither the listener nor done ran for it
    assert any("listener raised" in r.getMessage() for r in caplog.records)
    with pytest.raises(TypeError, match="threaded"):
        concurrent(listener, threaded=False).submit([], "x", answers.done_for("x"), lambda: False)


async def test_a_def_listener_returning_an_awaitable_is_awaited_on_the_loop() -> None:
    # ``lambda msgs, ctx: handle(msgs)`` is a def: it runs on a thread, and what it
    # returns is awaited on the loop, as ``call`` does.
    handled: list[str] = []

    async def handle(ctx: str) -> object:
        handled.append(ctx)
        return LATER if ctx == "later" else None

    runner = concurrent(lambda msgs, ctx: handle(ctx))
    answers = Answers(2)
    try:
        for ctx in ("ok", "later"):
            runner.submit([], ctx, answers.done_for(ctx), lambda: False)
        await wait_until(answers.all_came, timeout=10, what="both answers")
    finally:
        await runner.shutdown()
    assert answers.by_context == {"ok": OK, "later": LATER}
    assert sorted(handled) == ["later", "ok"]


async def test_call_run_stops_after_the_first_failure_and_when_told() -> None:
    calls: list[str] = []
    stop = threading.Event()

    def listener(msgs: list[MessageExt], ctx: object) -> object:
        calls.append(str(ctx))
        if ctx == "stop-after":
            stop.set()
        if ctx == "raise":
            raise RuntimeError("listener bug")
        return SUSPEND if ctx == "suspend" else None

    runner = orderly(listener)
    try:
        ran = await runner.call_run([([], c) for c in ("a", "suspend", "b")], lambda m: True)
        raised = await runner.call_run([([], c) for c in ("c", "raise", "d")], lambda m: True)
        told = await runner.call_run(
            [([], c) for c in ("e", "stop-after", "f")], lambda m: not stop.is_set()
        )
    finally:
        await runner.shutdown()
    assert [status for status, _ms in ran] == [SUCCESS, SUSPEND]
    assert [status for status, _ms in raised] == [SUCCESS, SUSPEND]
    assert [status for status, _ms in told] == [SUCCESS, SUCCESS]
    assert calls == ["a", "suspend", "c", "raise", "e", "stop-after"]  # b, d, f never ran
    assert all(ms >= 0 for _status, ms in ran + raised + told)
