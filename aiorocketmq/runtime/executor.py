"""How blocking work leaves the event loop: a named thread pool.

Owns: ``BlockingExecutor``, a named ``ThreadPoolExecutor`` wrapper whose
``run()`` awaits a blocking function's result on the loop. One per store or
service (``"store-flush"``, ``"store-clean"``...), so thread dumps and logs say
whose work a thread is doing. Many short calls the loop awaits (a push
consumer's ``def`` listener) go to ``call_threads.CallThreads`` instead, which
batches the hand-offs this pool pays per call.

The contract for functions run here (their names end in ``_blocking``):

- they take every input as an argument and return their result;
- they never touch loop objects (futures, events, tasks, transports), never
  call ``loop.call_soon``, and never mutate state the loop also reads: the loop
  resolves waiters with the returned value;
- they may block (msync, fsync, preallocate, unlink, scan files).

Must not: be used for CPU-light or non-blocking work (call it directly), hide
threads (there is no default pool here), or resolve futures from a worker thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import logging
import os
import sys
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar, TypeVarTuple

from aiorocketmq.runtime.lifecycle import ServiceStateError

__all__ = ["BlockingExecutor", "init_worker_thread"]

log = logging.getLogger(__name__)

R = TypeVar("R")
Ts = TypeVarTuple("Ts")


class BlockingExecutor:
    """A named thread pool for ``*_blocking`` functions.

    Example::

        executor = BlockingExecutor("store-flush", max_workers=1)
        flushed_to = await executor.run(mapped_file.flush_blocking, position)
        await executor.shutdown()

    Cancelling the coroutine awaiting ``run()`` does not stop a function that
    already started: threads cannot be interrupted. Its result is discarded.
    """

    def __init__(
        self,
        name: str,
        max_workers: int = 1,
        *,
        nice: int = 0,
        idle: bool = False,
        prestart: bool = False,
    ) -> None:
        """Create the pool; threads start lazily, named ``<name>_<n>``.

        Args:
            name: Thread name prefix, e.g. ``"store-flush"``; also the threads' OS name
                (first 15 bytes, Linux), so ``top -H`` says whose work burns CPU.
            max_workers: Upper bound on threads (and concurrent functions).
            nice: How much lower than the process the threads' CPU priority is
                (Linux: per thread). Background work that competes with the event
                loop for a core (prefaulting a new file zeroes 128 MiB of pages)
                should yield it to the loop. A thread cannot raise its priority back
                unprivileged, which is why niceness belongs to a pool, not a call.
            idle: run the threads under ``SCHED_IDLE`` (Linux): they get a core only
                when no other thread wants it, and a waking thread takes the core from
                them at once (the scheduler counts a core running only such threads as
                idle). For work nobody waits for; falls back to nice 19 where the
                policy is refused.
            prestart: start every thread now (``prestart``): for pools made at
                start-up whose work comes while the loop is serving.

        Raises:
            ValueError: If ``max_workers`` is less than 1, ``nice`` is negative or
                ``name`` is empty.
        """
        if not name:
            raise ValueError("a BlockingExecutor needs a name")
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        if nice < 0:
            raise ValueError(f"nice must be >= 0, got {nice}")
        self.name = name
        self.max_workers = max_workers
        self.nice = nice
        self.idle = idle
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_workers,
            thread_name_prefix=name,
            initializer=init_worker_thread,
            initargs=(name, nice, idle),
        )
        if prestart:
            self.prestart()
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once ``shutdown()`` was called."""
        return self._closed

    @property
    def pending(self) -> int:
        """Functions submitted and not finished yet."""
        return sum(1 for f in self._pending if not f.done())

    def prestart(self) -> None:
        """Start every worker thread now; blocks the caller until they run.

        The pool starts a thread when work finds none idle, and ``Thread.start`` waits
        until the new thread has run: on a busy machine that held the event loop
        several ms in the middle of serving. Call this at start-up instead.
        """
        barrier = threading.Barrier(self.max_workers)
        # Each task waits for the others, so no thread is idle when the next is
        # submitted: the pool starts one per task, up to max_workers.
        tasks = [self._pool.submit(_meet, barrier) for _ in range(self.max_workers)]
        concurrent.futures.wait(tasks, timeout=_PRESTART_TIMEOUT_S)

    async def run(self, fn: Callable[[*Ts], R], *args: *Ts) -> R:
        """Run ``fn(*args)`` in a pool thread and return its result.

        Args:
            fn: A ``*_blocking`` function (see the module docstring).
            *args: Its inputs, passed positionally.

        Returns:
            What ``fn`` returned.

        Raises:
            ServiceStateError: If the executor was shut down.
            Exception: Whatever ``fn`` raised, unchanged.
        """
        if self._closed:
            raise ServiceStateError(f"executor {self.name!r} is shut down")
        cfut = self._pool.submit(fn, *args)
        # _pending is touched only on the loop thread, never from a worker.
        self._pending.add(cfut)
        try:
            return await asyncio.wrap_future(cfut)
        finally:
            if cfut.done():
                self._pending.discard(cfut)
            else:  # the caller was cancelled while fn runs: forget it once done
                asyncio.wrap_future(cfut).add_done_callback(lambda afut: self._forget(cfut, afut))

    def _forget(self, cfut: concurrent.futures.Future[Any], afut: asyncio.Future[Any]) -> None:
        self._pending.discard(cfut)
        if not afut.cancelled():
            afut.exception()  # nobody awaits a cancelled caller's result

    async def shutdown(self, wait: bool = True) -> None:
        """Refuse new work and, if ``wait``, await the work already submitted.

        Idempotent. With ``wait=False`` queued functions that have not started
        are cancelled and running ones are left to finish in the background.

        Args:
            wait: Await submitted functions (and join the threads) first.
        """
        if self._closed and not wait:
            return
        self._closed = True
        if not wait:
            self._pool.shutdown(wait=False, cancel_futures=True)
            return
        self._pool.shutdown(wait=False)
        running = [f for f in self._pending if not f.done()]
        if running:
            # Await completion without blocking the loop; failures belong to
            # the callers of run(), so they are not re-raised here.
            waiters = [asyncio.wrap_future(f) for f in running]
            await asyncio.gather(*waiters, return_exceptions=True)
        # Every worker is now idle and has been told to exit: joining is brief.
        self._pool.shutdown(wait=True)

    async def __aenter__(self) -> BlockingExecutor:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()


def _meet(barrier: threading.Barrier) -> None:
    try:
        barrier.wait(_PRESTART_TIMEOUT_S)
    except threading.BrokenBarrierError:
        pass  # a worker busy with earlier work: the rest started anyway


def init_worker_thread(name: str, nice: int, idle: bool = False) -> None:
    """A worker's OS thread name and priority (best effort: Linux only, never fatal)."""
    tid = threading.get_native_id()
    if _PRCTL is not None:
        _PRCTL(_PR_SET_NAME, name.encode("utf-8", "replace")[:15], 0, 0, 0)
    if idle and hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
            return
        except OSError as exc:
            log.debug("no SCHED_IDLE for name=%s error=%s; nice 19 instead", name, exc)
        nice = 19
    if nice and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
        except OSError as exc:  # a sandbox may forbid it: the work still runs
            log.debug("cannot lower thread priority name=%s error=%s", name, exc)


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


_PR_SET_NAME = 15
_PRESTART_TIMEOUT_S = 5.0
_PRCTL = _load_prctl()
