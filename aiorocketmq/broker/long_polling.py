"""Long polling: pulls held until a message arrives or their hold time ends.

Owns: ``PullRequestHoldService`` (RocketMQ's ``PullRequestHoldService`` with
``PullRequest`` / ``ManyPullRequest`` / ``NotifyMessageArrivingListener``): held
pulls per ``"topic@queueId"``, each with its request, connection, the offset it
pulls from, suspend time, hold time and tag filter codes, and a future the pull
processor awaits for the reply. A held pull is re-run (the injected ``rerun``, with
``brokerAllowSuspend=false`` semantics: it must not suspend again) when

* the store's arrival listener (``on_arrival``, the dispatcher's signature) reports
  newer data for its queue with a matching tag, in the same loop iteration; or
* a sweep (every 5 s with long polling, ``shortPollingTimeMills`` without) finds
  newer data or the hold time over.

Also: a bound on held pulls (``HoldLimitExceededError`` beyond it, for the processor
to answer SYSTEM_BUSY), dropping a closed connection's pulls, and answering nothing
for every held pull at shutdown. Clock injected; bookkeeping is plain ``def``, the
only coroutine is the periodic sweep.

Must not: read messages, build pull replies or decide whether to hold (the pull
processor does), or block the loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from aiorocketmq.common.clock import Clock
from aiorocketmq.common.errors import RocketMQError
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.runtime.lifecycle import Service

__all__ = [
    "DEFAULT_MAX_HELD_PULLS",
    "LONG_POLLING_SWEEP_MS",
    "HeldPull",
    "HoldLimitExceededError",
    "PullRequestHoldService",
]

log = logging.getLogger(__name__)

#: Sweep interval with long polling on (RocketMQ: 5 s).
LONG_POLLING_SWEEP_MS = 5_000
#: Default bound on held pulls across all connections.
DEFAULT_MAX_HELD_PULLS = 100_000

#: The reply to send, or None for no reply.
PullReply = RemotingCommand | None


class HoldLimitExceededError(RocketMQError):
    """Too many pulls are held already; answer the pull SYSTEM_BUSY instead."""


@dataclass(slots=True, eq=False)
class HeldPull:
    """One suspended PULL_MESSAGE (``PullRequest``)."""

    request: RemotingCommand
    channel: Hashable
    topic: str
    queue_id: int
    #: The queue offset the client asked for.
    pull_from_offset: int
    #: ``clock.monotonic_ms()`` when it was held.
    suspend_ms: int
    #: How long to hold it.
    timeout_ms: int
    #: Tag hash codes that wake it; None wakes on any tag.
    tag_codes: frozenset[int] | None
    #: Resolved with the re-run's reply (None: send nothing).
    future: asyncio.Future[PullReply]
    #: Free for the processor (e.g. the parsed header).
    context: Any = None
    started: bool = field(default=False)

    def matches(self, tags_code: int | None) -> bool:
        """Whether a message with ``tags_code`` wakes it (None: unknown, always)."""
        return tags_code is None or self.tag_codes is None or tags_code in self.tag_codes


class PullRequestHoldService(Service):
    """Held pulls by queue, woken by arrivals and by a periodic sweep."""

    def __init__(
        self,
        *,
        clock: Clock,
        max_offset: Callable[[str, int], int],
        rerun: Callable[[HeldPull], Awaitable[PullReply]],
        long_polling_enable: bool = True,
        short_polling_ms: int = 1_000,
        max_held: int = DEFAULT_MAX_HELD_PULLS,
    ) -> None:
        super().__init__("PullRequestHoldService")
        self._clock = clock
        self._max_offset = max_offset
        self._rerun = rerun
        self.long_polling_enable = long_polling_enable
        self.short_polling_ms = short_polling_ms
        self.max_held = max_held
        self._table: dict[str, list[HeldPull]] = {}
        self._count = 0
        self._running: set[asyncio.Task[None]] = set()

    # -- bookkeeping (plain def) ------------------------------------------------

    @property
    def held_count(self) -> int:
        """Pulls held now (not counting ones being re-run)."""
        return self._count

    def hold_time_ms(self, suspend_timeout_ms: int) -> int:
        """How long to hold a pull: its own timeout, or ``shortPollingTimeMills``."""
        return suspend_timeout_ms if self.long_polling_enable else self.short_polling_ms

    def suspend(
        self,
        request: RemotingCommand,
        channel: Hashable,
        *,
        topic: str,
        queue_id: int,
        pull_from_offset: int,
        timeout_ms: int,
        tag_codes: frozenset[int] | None,
        context: Any = None,
    ) -> HeldPull:
        """Hold a pull; await ``held.future`` for its reply.

        Raises:
            HoldLimitExceededError: ``max_held`` pulls are held already.
        """
        if self._count >= self.max_held:
            raise HoldLimitExceededError(
                f"too many held pulls ({self._count} >= {self.max_held}); try again later"
            )
        held = HeldPull(
            request=request,
            channel=channel,
            topic=topic,
            queue_id=queue_id,
            pull_from_offset=pull_from_offset,
            suspend_ms=self._clock.monotonic_ms(),
            timeout_ms=timeout_ms,
            tag_codes=tag_codes,
            future=asyncio.get_running_loop().create_future(),
            context=context,
        )
        self._table.setdefault(_key(topic, queue_id), []).append(held)
        self._count += 1
        return held

    def on_arrival(  # noqa: PLR0917 - the store's positional listener signature
        self,
        topic: str,
        queue_id: int,
        max_offset: int,
        tags_code: int,
        store_timestamp: int,
        properties: str,
    ) -> None:
        """The store's arrival listener (``NotifyMessageArrivingListener``); never raises."""
        if not self._table:
            return  # no pull held anywhere: every put's dispatch asks
        try:
            self.notify_message_arriving(topic, queue_id, max_offset, tags_code)
        except Exception:
            # The dispatcher calls this inline: an error here must not stop dispatch.
            log.exception("waking held pulls of %s@%s failed", topic, queue_id)

    def notify_message_arriving(
        self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None
    ) -> int:
        """Re-run the held pulls of one queue that newer data or time allows; how many."""
        key = _key(topic, queue_id)
        held_list = self._table.pop(key, None)
        if not held_list:
            return 0
        now = self._clock.monotonic_ms()
        keep: list[HeldPull] = []
        woken = 0
        for held in held_list:
            newest = max_offset
            if newest <= held.pull_from_offset:
                newest = self._current_max(topic, queue_id, max_offset)
            ready = newest > held.pull_from_offset and held.matches(tags_code)
            if ready or now >= held.suspend_ms + held.timeout_ms or held.future.done():
                self._count -= 1
                woken += 1
                self._start(held)
            else:
                keep.append(held)
        if keep:
            self._table.setdefault(key, []).extend(keep)
        return woken

    def _current_max(self, topic: str, queue_id: int, fallback: int) -> int:
        try:
            return self._max_offset(topic, queue_id)
        except Exception:
            log.exception("max offset of %s@%s failed; held pulls stay held", topic, queue_id)
            return fallback

    def check_hold_requests(self) -> int:
        """The sweep: every queue with held pulls, at its current max offset."""
        woken = 0
        for key in list(self._table):
            topic, _, queue_id = key.rpartition("@")
            try:
                max_offset = self._max_offset(topic, int(queue_id))
            except Exception:
                log.exception("max offset of %s failed in the hold sweep", key)
                continue
            woken += self.notify_message_arriving(topic, int(queue_id), max_offset)
        return woken

    def on_channel_closed(self, channel: Hashable) -> int:
        """Drop a closed connection's held pulls (answered with no reply); how many."""
        dropped = 0
        for key, held_list in list(self._table.items()):
            keep = [h for h in held_list if h.channel != channel]
            for held in held_list:
                if held.channel == channel:
                    _settle(held.future, None)
                    dropped += 1
            if keep:
                self._table[key] = keep
            else:
                del self._table[key]
        self._count -= dropped
        return dropped

    def drop_all(self) -> int:
        """Answer every held pull with no reply (shutdown); how many."""
        dropped = 0
        for held_list in self._table.values():
            for held in held_list:
                _settle(held.future, None)
                dropped += 1
        self._table.clear()
        self._count = 0
        return dropped

    def _start(self, held: HeldPull) -> None:
        if held.future.done():  # the processor gave up (cancelled): nothing to answer
            return
        held.started = True
        try:
            awaitable = self._rerun(held)
        except Exception as exc:
            held.future.set_exception(exc)
            return
        task = asyncio.get_running_loop().create_task(self._finish(held, awaitable))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    @staticmethod
    async def _finish(held: HeldPull, awaitable: Awaitable[PullReply]) -> None:
        try:
            reply = await awaitable
        except asyncio.CancelledError:
            held.future.cancel()
            raise
        except Exception as exc:
            if not held.future.done():
                held.future.set_exception(exc)
            return
        _settle(held.future, reply)

    # -- lifecycle ---------------------------------------------------------------

    @property
    def sweep_interval_ms(self) -> int:
        """5 s with long polling, ``shortPollingTimeMills`` without."""
        return LONG_POLLING_SWEEP_MS if self.long_polling_enable else self.short_polling_ms

    async def on_start(self) -> None:
        """Start the periodic sweep."""
        self.periodic(self.sweep_interval_ms / 1000, self.check_hold_requests, name="sweep")

    async def on_shutdown(self) -> None:
        """Answer held pulls with nothing and wait for re-runs in flight."""
        self.drop_all()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)


def _key(topic: str, queue_id: int) -> str:
    return f"{topic}@{queue_id}"


def _settle(future: asyncio.Future[PullReply], reply: PullReply) -> None:
    if not future.done():
        future.set_result(reply)
