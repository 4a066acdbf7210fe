"""The lifecycle every long-lived object follows, and the tasks it owns.

Owns: ``Service`` (``start()``, idempotent ``shutdown()``, ``spawn()`` of owned
background tasks, ``periodic()`` work on an interval), the supervision of those
tasks (a task that dies with an exception is logged once and reported through
``Service.on_task_failed``), and ``Periodic``, the handle and counters of one
periodic job.

Must not: run blocking work on the loop (that goes to ``BlockingExecutor``),
sleep-poll (background loops wait on an ``asyncio.Event`` with a timeout so that
shutdown wakes them at once), swallow a background failure, or keep any
module-level mutable state.

States::

    NEW --start()--> STARTING --on_start() ok--> RUNNING --shutdown()--> STOPPING --> STOPPED
     |                  |                                                               ^
     |                  +--on_start() raised (tasks spawned so far are cancelled)-------+
     +--shutdown() before start()---------------------------------------------------------+

A stopped service never starts again: ``start()`` after ``shutdown()`` raises
``ServiceStateError``. This mirrors RocketMQ's ``ServiceState`` and keeps "was it
flushed?" questions simple.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiorocketmq.common.errors import RocketMQError

__all__ = [
    "BackgroundTaskError",
    "Periodic",
    "Service",
    "ServiceState",
    "ServiceStateError",
    "TaskFailure",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ServiceStateError(RocketMQError):
    """An operation is not allowed in the service's current state.

    Raised by ``start()`` or ``spawn()`` after ``shutdown()`` began, and by
    ``BlockingExecutor.run`` after its shutdown.
    """


class BackgroundTaskError(RocketMQError):
    """A task owned by a service died; raised by ``Service.raise_if_failed``.

    The task's own exception is the ``__cause__``.
    """


class ServiceState(enum.Enum):
    """Where a ``Service`` is in its lifecycle (see the module docstring)."""

    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"


@dataclass(slots=True, frozen=True)
class TaskFailure:
    """One owned task that ended with an exception.

    Attributes:
        task_name: The task's name, ``"<service>:<name>"``.
        exc: The exception the task died with.
    """

    task_name: str
    exc: BaseException


@dataclass(slots=True, eq=False)
class Periodic:
    """Handle and counters of one job started by ``Service.periodic``.

    Attributes:
        name: The job's name (also the owned task's name suffix).
        interval_s: Seconds between the starts of two runs.
        runs: Runs completed, successful or not.
        failures: Runs that raised.
        consecutive_failures: Failures since the last successful run.
        last_exc: The exception of the most recent failed run, if any.
        task: The owned task running the loop (set by ``Service.periodic``).
    """

    name: str
    interval_s: float
    runs: int = 0
    failures: int = 0
    consecutive_failures: int = 0
    last_exc: Exception | None = None
    task: asyncio.Task[None] | None = None
    _wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _stopped: bool = field(default=False, repr=False)

    def wakeup(self) -> None:
        """Run the job now instead of at its next tick (RocketMQ's ``wakeup()``)."""
        self._wake.set()

    def stop(self) -> None:
        """Make the loop return at once, without starting another run."""
        self._stopped = True
        self._wake.set()

    @property
    def stopped(self) -> bool:
        """True once ``stop()`` was called."""
        return self._stopped


class Service:
    """Base class of every long-lived object: start, shutdown, owned tasks.

    Subclasses put their start-up in ``on_start()`` (spawning their background
    tasks there) and their final work (flush, persist, close) in
    ``on_shutdown()``. Both hooks run at most once.

    Every task started with ``spawn()`` or ``periodic()`` is owned: shutdown
    cancels and awaits it. If one dies with an exception, the service logs it
    once with context, then calls ``on_task_failed(task, exc)``; the default
    records a ``TaskFailure`` in ``self.failures`` so a client can surface it
    (``raise_if_failed()``). Servers override the hook to start an orderly
    shutdown.

    Attributes:
        name: Used in task names and log lines.
        failures: Failures recorded by the default ``on_task_failed``.
        shutdown_grace_s: Class default for how long ``shutdown()`` lets owned
            tasks finish on their own (periodic jobs return as soon as they are
            stopped) before cancelling them.
    """

    shutdown_grace_s: float = 0.0

    def __init__(self, name: str | None = None) -> None:
        """Create a service in state NEW.

        Args:
            name: Name for logs and task names; defaults to the class name.
        """
        self.name: str = name if name is not None else type(self).__name__
        self.failures: list[TaskFailure] = []
        self._state = ServiceState.NEW
        self._tasks: set[asyncio.Task[Any]] = set()
        self._periodics: list[Periodic] = []
        self._stopping = asyncio.Event()
        self._start_done: asyncio.Future[None] | None = None
        self._shutdown_done: asyncio.Future[None] | None = None

    # -- hooks -----------------------------------------------------------------

    async def on_start(self) -> None:
        """Start the service's work; called once by ``start()``. Default: nothing."""

    async def on_shutdown(self) -> None:
        """Final work after owned tasks ended; called once by ``shutdown()``.

        Not called if the service was never started.
        """

    def on_task_failed(self, task: asyncio.Task[Any], exc: BaseException) -> None:
        """React to an owned task that died with ``exc``; runs on the loop.

        The failure was already logged when this runs. The default remembers
        it in ``self.failures``. Servers override this to request an orderly
        shutdown, e.g. by setting the event their entry point waits on (see
        ``runtime.loop.run``); clients keep the default and surface it with
        ``raise_if_failed()``. An exception raised here is not caught:
        it reaches the loop's exception handler.

        Args:
            task: The owned task, already done.
            exc: The exception it ended with.
        """
        self.failures.append(TaskFailure(task.get_name(), exc))

    # -- state -----------------------------------------------------------------

    @property
    def state(self) -> ServiceState:
        """The current lifecycle state."""
        return self._state

    @property
    def running(self) -> bool:
        """True between a successful ``start()`` and ``shutdown()``."""
        return self._state is ServiceState.RUNNING

    @property
    def stopping(self) -> asyncio.Event:
        """Set when ``shutdown()`` begins; background loops may wait on it."""
        return self._stopping

    @property
    def tasks(self) -> frozenset[asyncio.Task[Any]]:
        """The owned tasks that have not finished yet."""
        return frozenset(self._tasks)

    def raise_if_failed(self) -> None:
        """Raise if an owned task has died (the client-side way to surface it).

        Raises:
            BackgroundTaskError: Chained from the first recorded failure.
        """
        if self.failures:
            first = self.failures[0]
            raise BackgroundTaskError(
                f"{self.name}: background task {first.task_name} failed: {first.exc!r}"
            ) from first.exc

    # -- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        """Start the service; a second call returns once the first has finished.

        Raises:
            ServiceStateError: If ``shutdown()`` was already called.
            Exception: Whatever ``on_start()`` raised; the service is then
                shut down (its tasks cancelled) and cannot be started again.
        """
        if self._state in (ServiceState.STOPPING, ServiceState.STOPPED):
            raise ServiceStateError(f"{self.name}: start() after shutdown()")
        if self._start_done is not None:
            await asyncio.shield(self._start_done)
            return
        self._start_done = asyncio.get_running_loop().create_future()
        self._state = ServiceState.STARTING
        try:
            await self.on_start()
        except BaseException as exc:
            await self._stop(call_hook=False)
            _settle_failed(self._start_done, exc)
            raise
        self._state = ServiceState.RUNNING
        self._start_done.set_result(None)
        logger.debug("service started", extra={"service": self.name})

    async def shutdown(self) -> None:
        """Stop the service; idempotent, and concurrent calls share one shutdown.

        Stops periodic jobs, gives owned tasks ``shutdown_grace_s`` to end,
        cancels and awaits the rest, then calls ``on_shutdown()`` (only if the
        service had started). A ``start()`` in progress is let finish first.
        """
        if self._start_done is not None and not self._start_done.done():
            await asyncio.wait([self._start_done])
        if self._shutdown_done is not None:
            await asyncio.shield(self._shutdown_done)
            return
        await self._stop(call_hook=self._state is not ServiceState.NEW)

    async def _stop(self, *, call_hook: bool) -> None:
        self._shutdown_done = asyncio.get_running_loop().create_future()
        self._state = ServiceState.STOPPING
        self._stopping.set()
        try:
            for job in self._periodics:
                job.stop()
            await self._end_tasks()
            if call_hook:
                await self.on_shutdown()
        except BaseException as exc:
            _settle_failed(self._shutdown_done, exc)
            raise
        finally:
            self._state = ServiceState.STOPPED
        self._shutdown_done.set_result(None)
        logger.debug("service stopped", extra={"service": self.name})

    async def _end_tasks(self) -> None:
        """Let owned tasks finish within the grace period, then cancel the rest."""
        # Tasks may spawn no new tasks now (spawn refuses), so one pass is enough.
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        if not tasks:
            return
        if self.shutdown_grace_s > 0:
            await asyncio.wait(tasks, timeout=self.shutdown_grace_s)
        for task in tasks:
            task.cancel()
        # Exceptions were already reported by _on_task_done; gather only waits.
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- owned tasks -----------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
        """Run ``coro`` as a task owned by this service.

        Args:
            coro: The coroutine to run.
            name: Short name; the task is named ``"<service>:<name>"``.

        Returns:
            The task. Shutdown cancels and awaits it; if it dies with an
            exception, that is logged and passed to ``on_task_failed``.

        Raises:
            ServiceStateError: If shutdown has begun (``coro`` is closed).
        """
        if self._state in (ServiceState.STOPPING, ServiceState.STOPPED):
            coro.close()  # never awaited on purpose; avoid the RuntimeWarning
            raise ServiceStateError(f"{self.name}: spawn({name!r}) after shutdown()")
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name}:{name}")
        self._tasks.add(task)
        task.add_done_callback(self._on_task_done)
        return task

    def _on_task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()  # marks it retrieved: we report it ourselves
        if exc is None:
            return
        logger.error(
            "owned task died",
            exc_info=exc,
            extra={"service": self.name, "task": task.get_name(), "state": self._state.value},
        )
        self.on_task_failed(task, exc)

    def periodic(
        self,
        interval_s: float,
        fn: Callable[[], object],
        *,
        name: str,
        initial_delay_s: float | None = None,
    ) -> Periodic:
        """Run ``fn`` every ``interval_s`` seconds in an owned task.

        ``fn`` may be a plain function (it runs on the loop, so it must not
        block) or return an awaitable (an ``async def``), which is awaited.
        Runs start ``interval_s`` apart; a run that overruns delays the next
        one instead of causing a burst. A run that raises is counted and logged
        (the first of a streak at ERROR with its traceback, repeats at DEBUG, the
        recovery at INFO) and the job goes on. Shutdown wakes the wait at once.

        Args:
            interval_s: Seconds between run starts; must be > 0.
            fn: The job.
            name: Short name for the task and logs.
            initial_delay_s: Seconds before the first run; defaults to
                ``interval_s``. Use 0 to run at once.

        Returns:
            The job's ``Periodic`` handle (counters, ``wakeup()``).

        Raises:
            ValueError: If ``interval_s`` is not positive or the delay negative.
            ServiceStateError: If shutdown has begun.
        """
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        delay_s = interval_s if initial_delay_s is None else initial_delay_s
        if delay_s < 0:
            raise ValueError(f"initial_delay_s must be >= 0, got {delay_s!r}")
        job = Periodic(name=name, interval_s=interval_s)
        job.task = self.spawn(self._periodic_loop(job, fn, delay_s), name=name)
        self._periodics.append(job)
        return job

    async def _periodic_loop(self, job: Periodic, fn: Callable[[], object], delay_s: float) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time() + delay_s
        while True:
            woken = await _wait_event(job._wake, next_at - loop.time())
            if job.stopped:
                return
            if woken:
                job._wake.clear()
            started_at = loop.time()
            await self._run_once(job, fn)
            # Next start is interval_s after this one; after an overrun, at once.
            next_at = max(started_at + job.interval_s, loop.time())

    async def _run_once(self, job: Periodic, fn: Callable[[], object]) -> None:
        ctx: dict[str, object] = {"service": self.name, "job": job.name}
        try:
            result = fn()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            job.runs += 1
            job.failures += 1
            job.consecutive_failures += 1
            job.last_exc = exc
            if job.consecutive_failures == 1:
                logger.error("periodic run failed", exc_info=exc, extra=ctx)
            else:
                streak = {"consecutive_failures": job.consecutive_failures}
                logger.debug("periodic run failed again: %r", exc, extra=ctx | streak)
            return
        job.runs += 1
        if job.consecutive_failures:
            streak = {"failed_runs": job.consecutive_failures}
            logger.info("periodic run recovered", extra=ctx | streak)
            job.consecutive_failures = 0


async def _wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for ``event`` at most ``timeout_s``; True if it was set."""
    if event.is_set():
        return True
    if timeout_s <= 0:
        return False
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return False
    return True


def _settle_failed(fut: asyncio.Future[None], exc: BaseException) -> None:
    """Fail ``fut`` with ``exc`` for concurrent waiters, marked as retrieved."""
    if isinstance(exc, asyncio.CancelledError):
        fut.cancel()
        return
    fut.set_exception(exc)
    fut.exception()  # the caller re-raises exc itself; waiters get it via the future
