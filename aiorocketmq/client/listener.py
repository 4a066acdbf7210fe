"""Push-consumer listeners: their statuses and contexts, where they run, what their answer means.

Owns (Java 4.9.8 ``MessageListenerConcurrently`` / ``MessageListenerOrderly`` and the
part of the consume services that calls them):

- ``ConsumeConcurrentlyStatus``, ``ConsumeOrderlyStatus`` and the two contexts;
- ``ListenerRunner``: calls ``listener(msgs, context)`` and reads its answer.

Where a listener runs:

- an ``async def`` listener (or an object with ``async def __call__``) runs on the
  event loop: it must not block;
- a plain ``def`` listener runs on the consumer's own thread pool of
  ``consumeThreadMax`` threads (Java's ConsumeMessageThread pool), so a listener that
  blocks (a database call, ``time.sleep``) stalls only its thread, never the client.
  It must not touch loop objects (``asyncio.Event.set``, futures): use
  ``loop.call_soon_threadsafe`` for that, or write it ``async``. ``threaded=False``
  at registration runs it on the loop instead (for quick, non-blocking listeners).

What the answer means (the choice documented in the README):

==========================  ===============================  ================================
listener ...                concurrent                       orderly
==========================  ===============================  ================================
returns None                CONSUME_SUCCESS                  SUCCESS
returns its own status      that status                      that status
returns the other kind      same meaning (SUCCESS <->        same meaning
                            CONSUME_SUCCESS, SUSPEND... <->
                            RECONSUME_LATER)
raises                      RECONSUME_LATER (logged)         SUSPEND_CURRENT_QUEUE_A_MOMENT
returns anything else       CONSUME_SUCCESS, and one         SUCCESS, and one warning per
                            warning per consumer             consumer
==========================  ===============================  ================================

None means success as in aio-pika's ``process()``: a listener that forgets its
``return`` must not send every message back (Java, where a null answer is
RECONSUME_LATER, cannot forget one). Any other value (``0``, ``True``, a count) is
not a failure either: failing is raising or returning RECONSUME_LATER. Treating such
a value as a retry turned 2,011 consumed messages into 1,010 redeliveries in a
minute; the warning names the value so the mistake is seen once, not per message.

Must not: pull, commit offsets or send messages back (the consume services do).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar, cast

from aiorocketmq.client.errors import InvalidArgumentError
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.runtime.call_threads import CallThreads

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "Listener",
    "ListenerRunner",
    "is_async_listener",
]

log = logging.getLogger(__name__)


class ConsumeConcurrentlyStatus(enum.Enum):
    """A concurrent listener's answer."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    """An orderly listener's answer."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """What a concurrent listener may read and set.

    Attributes:
        message_queue: the queue the messages came from.
        delay_level_when_next_consume: 0 lets the broker choose (3 + reconsume
            times); -1 sends the messages straight to the DLQ.
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0


@dataclass(slots=True)
class ConsumeOrderlyContext:
    """What an orderly listener may read and set.

    Attributes:
        message_queue: the queue the messages came from.
        suspend_current_queue_time_millis: the pause after SUSPEND (-1: the
            consumer's ``suspend_current_queue_time_millis``).
    """

    message_queue: MessageQueue
    suspend_current_queue_time_millis: int = -1


Listener = Callable[[list[MessageExt], Any], Any]
"""``listener(msgs, context)``: ``def`` or ``async def``; returns a status or None."""

S = TypeVar("S", ConsumeConcurrentlyStatus, ConsumeOrderlyStatus)


def is_async_listener(listener: Listener) -> bool:
    """Whether calling ``listener`` gives a coroutine (functions, partials, ``__call__``)."""
    if inspect.iscoroutinefunction(listener):
        return True
    call = getattr(type(listener), "__call__", None)  # noqa: B004 - the class's, not callable()
    return inspect.iscoroutinefunction(call)


# One answer of each kind per meaning, so a listener returning the other kind's
# status is read by meaning rather than as "anything else".
_SUCCESS: dict[type[enum.Enum], enum.Enum] = {
    ConsumeConcurrentlyStatus: ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
    ConsumeOrderlyStatus: ConsumeOrderlyStatus.SUCCESS,
}
_FAILURE: dict[type[enum.Enum], enum.Enum] = {
    ConsumeConcurrentlyStatus: ConsumeConcurrentlyStatus.RECONSUME_LATER,
    ConsumeOrderlyStatus: ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
}


_SKIPPED: Any = object()
"""What ``_listen_unless`` returns when it did not call the listener."""


def _listen_unless(
    skip: Callable[[], bool], listener: Listener, msgs: list[MessageExt], context: object
) -> object:
    # On a listener thread: ``skip`` reads loop-side state (a queue dropped by a
    # rebalance), a plain read that is at worst one call late.
    if skip():
        return _SKIPPED
    return listener(msgs, context)


def _answered(done: Callable[[S], None], answering: asyncio.Future[S]) -> None:
    if not answering.cancelled():  # cancelled: the consumer shut down
        done(answering.result())


class ListenerRunner(Generic[S]):
    """Runs one consumer's listener where it belongs and reads its answer (module docstring).

    Args:
        listener: the registered listener.
        status_type: ``ConsumeConcurrentlyStatus`` or ``ConsumeOrderlyStatus``.
        group: the consumer group (thread names, log lines).
        threads: the thread pool's size for a sync listener (``consumeThreadMax``).
        threaded: None runs ``def`` listeners on the pool and ``async def`` ones on
            the loop; False runs a ``def`` listener on the loop too.

    Raises:
        InvalidArgumentError: ``threaded=True`` for an ``async def`` listener.
    """

    def __init__(
        self,
        listener: Listener,
        status_type: type[S],
        group: str,
        threads: int,
        threaded: bool | None = None,
    ) -> None:
        self.listener = listener
        self.status_type: type[S] = status_type
        self._success: S = self._status(_SUCCESS)  # every listener's usual answer
        self.group = group
        self.is_async = is_async_listener(listener)
        if self.is_async and threaded:
            raise InvalidArgumentError("an async listener runs on the event loop: threaded=True")
        self._pool: CallThreads | None = None
        if not self.is_async and threaded is not False:
            # Java names these threads ConsumeMessageThread_<n>.
            self._pool = CallThreads(f"ConsumeMessageThread_{group}", threads)
        self._warned = False
        self._answering: set[asyncio.Future[S]] = set()  # awaitables a def listener returned

    @property
    def threaded(self) -> bool:
        """Whether the listener runs on the thread pool."""
        return self._pool is not None

    async def call(self, msgs: list[MessageExt], context: object) -> S:
        """Run the listener once and return its answer as a status (module docstring)."""
        try:
            if self._pool is not None:
                result = await self._pool.run(self.listener, msgs, context)
            else:
                result = self.listener(msgs, context)
            if result is not None and inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            return self._raised(exc)
        return self.status_of(result)

    async def call_run(
        self,
        batches: list[tuple[list[MessageExt], object]],
        before: Callable[[list[MessageExt]], bool],
    ) -> list[tuple[S, float]]:
        """Consecutive calls of a threaded listener in one trip to its threads (an
        orderly queue's next batches): ``listener(msgs, context)`` for each batch in
        order, stopping before a batch when ``before(msgs)`` (called on the listener's
        thread) is false, and after the first answer that is not success or a raise.

        Returns:
            ``(status, ms)`` of each batch that ran, in order: its answer as ``call``
            reads it, and how long the listener took.
        """
        if self._pool is None:
            raise TypeError("call_run is for a threaded listener")
        runs = await self._pool.run(self._listen_run, batches, before)
        return [(await self._answer(ok, value), ms) for ok, value, ms in runs]

    async def _answer(self, ok: bool, value: object) -> S:
        """A threaded call's outcome as its status (``call``'s reading)."""
        if ok and inspect.isawaitable(value):  # a def listener that returned one
            try:
                return self.status_of(await value)
            except Exception as exc:
                return self._raised(exc)
        return self.status_of(value) if ok else self._raised(cast(BaseException, value))

    def _raised(self, exc: BaseException) -> S:
        log.error(
            "listener raised: the messages will be consumed again group=%s",
            self.group,
            exc_info=exc,
        )
        return self._status(_FAILURE)

    def _listen_run(
        self,
        batches: list[tuple[list[MessageExt], object]],
        before: Callable[[list[MessageExt]], bool],
    ) -> list[tuple[bool, object, float]]:
        # On a listener thread. ``status_of`` only reads (and may warn once).
        success = self._status(_SUCCESS)
        runs: list[tuple[bool, object, float]] = []
        for msgs, context in batches:
            if not before(msgs):
                break
            began = time.monotonic()
            try:
                value, ok = self.listener(msgs, context), True
            except Exception as exc:
                value, ok = exc, False
            runs.append((ok, value, (time.monotonic() - began) * 1000))
            if (
                not ok
                or (value is not None and inspect.isawaitable(value))
                or (self.status_of(value) is not success)
            ):
                break
        return runs

    def submit(
        self,
        msgs: list[MessageExt],
        context: object,
        done: Callable[[S], None],
        skip: Callable[[], bool],
    ) -> None:
        """Run a threaded listener with no coroutine per call: ``done(status)`` runs on
        the loop once it answered (``call``'s answer), unless ``skip()``, asked on the
        listener's thread just before, was true (then neither runs).

        Raises:
            ServiceStateError: after ``shutdown``.
        """
        if self._pool is None:
            raise TypeError("submit is for a threaded listener")

        def finish(ok: bool, value: object) -> None:
            if value is _SKIPPED:
                return
            # None, the usual answer, first: isawaitable costs more than the rest.
            if ok and value is not None and inspect.isawaitable(value):  # a lambda's coroutine
                answering = asyncio.ensure_future(self._answer(ok, value))
                self._answering.add(answering)
                answering.add_done_callback(self._answering.discard)
                answering.add_done_callback(partial(_answered, done))
                return
            done(self.status_of(value) if ok else self._raised(cast(BaseException, value)))

        self._pool.submit(_listen_unless, (skip, self.listener, msgs, context), finish)

    def status_of(self, result: object) -> S:
        """The status a listener's return value stands for (module docstring's table)."""
        if result is None:
            return self._success
        if isinstance(result, ConsumeConcurrentlyStatus | ConsumeOrderlyStatus):
            # Its own kind maps to itself; the other kind by meaning.
            table = _SUCCESS if result in _SUCCESS.values() else _FAILURE
            return self._status(table)
        if not self._warned:
            self._warned = True
            success = self._status(_SUCCESS)
            log.warning(
                "listener of group %s returned %r (%s), not a %s: treated as %s. Return "
                "None or %s on success; raise or return %s to consume the messages again "
                "(this warning is logged once per consumer)",
                self.group,
                result,
                type(result).__name__,
                self.status_type.__name__,
                success.name,
                success.name,
                self._status(_FAILURE).name,
            )
        return self._status(_SUCCESS)

    def _status(self, table: dict[type[enum.Enum], enum.Enum]) -> S:
        return cast(S, table[self.status_type])

    async def shutdown(self) -> None:
        """Stop the thread pool: calls not started are dropped, running ones finish alone.

        Threads cannot be interrupted; a running call's answer is discarded, so its
        messages stay uncommitted and are consumed again (Java's default
        ``awaitTerminationMillisWhenShutdown`` of 0 does the same).
        """
        for answering in list(self._answering):
            answering.cancel()
        if self._pool is not None:
            await self._pool.shutdown()
