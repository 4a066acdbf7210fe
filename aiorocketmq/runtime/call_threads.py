"""CallThreads: threads that run many short calls for the loop, handing results back in batches.

Owns: a push consumer's ``def`` listener threads (``consumeThreadMax``). Each consume
request is one call the loop awaits; a pull of 32 messages makes 32 of them at once.
``BlockingExecutor`` (a ``ThreadPoolExecutor``) pays per call for a
``concurrent.futures.Future`` with its condition, a work item, the ``wrap_future``
chain, a worker woken for each call and one ``call_soon_threadsafe`` per result: ~50 µs
of the loop's CPU per message on a 2-core VM, where an ``async def`` listener costs ~12.
Here:

- a call is queued (a deque, under one lock) with the loop's own future;
- a sleeping worker is woken only when no worker is awake: an awake one takes the
  next call when it finishes its current one, so a burst of quick calls is run by
  one thread;
- results go into a second deque, and only the first result since the loop last
  looked schedules a delivery: one wakeup of the loop resolves every future
  finished meanwhile;
- ``submit`` takes a callback instead of a future, for a caller with many calls
  (the consume service) that need not suspend a coroutine for each;
- while calls wait, the loop looks every ``wait_s`` (5 ms, the GIL's switch interval:
  a worker waiting for the GIL gets it within that time): if no call finished
  since its last look, the awake workers are held by calls that block (a database
  call, ``time.sleep``), and one more worker is woken or started, up to
  ``max_workers``. Blocking calls still overlap up to the pool's size, reached a
  few ms later than a worker-per-call pool would reach it (10 threads: ~50 ms).

A call whose awaiting coroutine was cancelled before a worker took it never runs
(as ``ThreadPoolExecutor``'s future, cancelled through ``wrap_future``). Threads are
daemons: a call still blocked when the interpreter exits is abandoned, not awaited
(its messages were never acknowledged and come again).

Must not: resolve futures or touch loop objects from a worker (results go back
through ``_deliver`` on the loop), or run a call on the loop's thread.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final, TypeAlias, TypeVar, TypeVarTuple

from aiorocketmq.runtime.executor import init_worker_thread
from aiorocketmq.runtime.lifecycle import ServiceStateError

__all__ = ["CallThreads"]

log = logging.getLogger(__name__)

R = TypeVar("R")
Ts = TypeVarTuple("Ts")

_WAIT_S: Final = 0.005
"""How often the loop looks whether queued calls wait behind blocking ones."""

# Where a call's result goes: ``run``'s future, or ``submit``'s callback.
_Sink: TypeAlias = "asyncio.Future[Any] | Callable[[bool, Any], None]"
# A queued call: the function, its arguments, its sink.
_Call: TypeAlias = tuple[Callable[..., Any], tuple[Any, ...], _Sink]


class CallThreads:
    """Up to ``max_workers`` daemon threads running the loop's calls (module docstring).

    Args:
        name: thread name prefix (``<name>_<n>``), also the OS thread name.
        max_workers: most calls running at once.
        wait_s: how often the loop looks, while calls wait, whether the awake workers
            are held (module docstring).

    Attributes:
        deliveries: times the loop took finished results (each may resolve many).

    Raises:
        ValueError: ``max_workers`` below 1 or an empty ``name``.
    """

    def __init__(self, name: str, max_workers: int, *, wait_s: float = _WAIT_S) -> None:
        if not name:
            raise ValueError("CallThreads needs a name")
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.name = name
        self.max_workers = max_workers
        self.deliveries = 0
        self._wait_s = wait_s
        self._lock = threading.Lock()
        self._calls: deque[_Call] = deque()
        self._done: deque[tuple[_Sink, bool, Any]] = deque()
        self._wakeups: queue.SimpleQueue[bool] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Under _lock: workers not waiting for a wakeup, workers waiting for one,
        # whether a delivery is scheduled on the loop, calls finished.
        self._awake = 0
        self._sleeping = 0
        self._delivering = False
        self._finished = 0  # calls finished so far; and at the last look
        self._finished_seen = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._check: asyncio.TimerHandle | None = None
        self._closed = False

    @property
    def threads(self) -> int:
        """Threads started so far (they live until ``shutdown``)."""
        return len(self._threads)

    async def run(self, fn: Callable[[*Ts], R], *args: *Ts) -> R:
        """Run ``fn(*args)`` on a worker thread and return its result.

        Raises:
            ServiceStateError: after ``shutdown``.
            asyncio.CancelledError: ``shutdown`` dropped the call before it started.
            Exception: whatever ``fn`` raised, unchanged.
        """
        loop = self._loop or asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._queue(fn, args, future)
        return await future

    def submit(
        self, fn: Callable[..., Any], args: tuple[Any, ...], done: Callable[[bool, Any], None]
    ) -> None:
        """Queue ``fn(*args)`` without a future: ``done(True, result)`` or
        ``done(False, exception)`` runs on the loop once it returned or raised (in a
        delivery with others). For a caller with many calls and no coroutine to
        suspend per call. A call ``shutdown`` drops gets no ``done``. Call it on the
        loop's thread.

        Raises:
            ServiceStateError: after ``shutdown``.
        """
        self._queue(fn, args, done)

    def _queue(self, fn: Callable[..., Any], args: tuple[Any, ...], sink: _Sink) -> None:
        if self._closed:
            raise ServiceStateError(f"call threads {self.name!r} are shut down")
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        with self._lock:
            self._calls.append((fn, args, sink))
            wake = start = False
            if self._awake == 0:  # nobody will take it: wake or start one worker
                self._awake += 1
                if self._sleeping:
                    self._sleeping -= 1
                    wake = True
                else:
                    start = len(self._threads) < self.max_workers
                    self._awake -= not start
        if wake:
            self._wakeups.put(True)
        elif start:
            self._start_thread()
        if self._check is None:
            self._check = loop.call_later(self._wait_s, self._check_waiting)

    async def shutdown(self) -> None:
        """Stop: queued calls are dropped (their futures cancelled); running ones finish
        alone (a caller still awaiting one gets its result); every thread then exits
        without being joined. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._check is not None:
            self._check.cancel()
            self._check = None
        with self._lock:
            dropped = list(self._calls)
            self._calls.clear()
        for _fn, _args, sink in dropped:
            if isinstance(sink, asyncio.Future):
                sink.cancel()
        for _ in self._threads:
            self._wakeups.put(False)

    # ------------------------------------------------------------------ the loop's side

    def _check_waiting(self) -> None:
        """While calls wait: if none finished since the last look (``wait_s`` ago), the
        awake workers are held by blocking calls, so one more worker is woken or started.
        One per look, so a loop that itself held the workers back wakes few."""
        self._check = None
        if self._closed:
            return
        with self._lock:
            if not self._calls:
                return  # ``run`` arms the next look
            held = self._finished == self._finished_seen
            self._finished_seen = self._finished
            wake = start = False
            if held:
                if self._sleeping:
                    self._sleeping -= 1
                    self._awake += 1
                    wake = True
                elif len(self._threads) < self.max_workers:
                    self._awake += 1
                    start = True
        if wake:
            self._wakeups.put(True)
        elif start:
            self._start_thread()
        if self._loop is not None:
            self._check = self._loop.call_later(self._wait_s, self._check_waiting)

    def _deliver(self) -> None:
        """Hand every call finished since the last delivery to its future or callback."""
        with self._lock:
            self._delivering = False
        self.deliveries += 1
        done = self._done
        while done:
            sink, ok, value = done.popleft()
            if not isinstance(sink, asyncio.Future):
                try:
                    sink(ok, value)
                except Exception:  # one caller's bug must not strand the others' results
                    log.exception("call threads %s: a result's callback raised", self.name)
            elif sink.cancelled():
                continue  # its caller gave up; a result nobody reads
            elif ok:
                sink.set_result(value)
            else:
                sink.set_exception(value)

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"{self.name}_{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    # --------------------------------------------------------------- the workers' side

    def _work(self) -> None:
        init_worker_thread(threading.current_thread().name, 0)
        lock, calls, done = self._lock, self._calls, self._done
        while True:
            with lock:
                call = calls.popleft() if calls else None
                if call is None:
                    self._awake -= 1
                    self._sleeping += 1
            if call is None:
                if not self._wakeups.get():
                    return  # shutdown
                continue
            fn, args, sink = call
            # A read of a future's state: the loop may cancel it meanwhile.
            if isinstance(sink, asyncio.Future) and sink.cancelled():
                continue
            try:
                done.append((sink, True, fn(*args)))
            except BaseException as exc:  # the caller's to handle, as ThreadPoolExecutor's
                done.append((sink, False, exc))
            with lock:
                self._finished += 1
                if self._delivering:
                    continue  # a scheduled delivery takes this result too
                self._delivering = True
            self._schedule_delivery()

    def _schedule_delivery(self) -> None:
        loop = self._loop
        try:
            if loop is not None:
                loop.call_soon_threadsafe(self._deliver)
        except RuntimeError:  # the loop is closed: nobody awaits these results any more
            log.debug("call threads %s: loop closed, results dropped", self.name)
