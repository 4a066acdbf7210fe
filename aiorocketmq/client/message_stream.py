"""``async for`` consumption: the push consumer's messages without a listener.

Owns: ``IteratorConsumeService`` (the consume service of a push consumer without a
listener: pulled batches wait in one queue shared by every open stream),
``MessageStream`` (yields ``MessageExt``, implicit acknowledgement),
``DeliveryStream`` and ``Delivery`` (explicit ``ack()`` / ``nack()``, as aio-pika's
``IncomingMessage`` and nats-py's ``Msg``).

Acknowledging a message is what a listener's CONSUME_SUCCESS does: it leaves its
process queue and the queue's offset may move past it. ``nack`` is RECONSUME_LATER
for that one message: it is sent back (CONSUMER_SEND_MSG_BACK) and comes again
through ``%RETRY%<group>``. A message neither acknowledged nor sent back holds its
queue's committed offset: after a restart or a rebalance it is consumed again
(at least once).

Implicit mode (``consumer.messages()``): a message is acknowledged once the loop is
done with it, that is when the loop asks for the next one, when the loop ends
without an exception (``break``, ``return``: settled when the stream is closed, when
another ``messages()`` loop starts, or at the consumer's shutdown), and sent back
when the loop ends with an exception that reaches ``async with consumer`` or
``async with consumer.messages() as stream``. Being a plain class rather than an
async generator, a stream needs no ``aclosing``: nothing happens at garbage
collection. ``aclose()`` (what ``contextlib.aclosing`` calls) sends the message in
hand back, as closing the former generator did.

Explicit mode (``consumer.deliveries()``): nothing is acknowledged for you. Call
``await delivery.ack()`` or ``await delivery.nack()``, or wrap the work in
``async with delivery:`` (ack on success, nack when it raises, the exception goes
on). Deliveries may be settled in any order; one still unsettled at shutdown stays
uncommitted (logged).

Must not: pull, rebalance or send messages back itself (the host does).
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

from aiorocketmq.client.consume_service import (
    ConcurrentConsumeService,
    ConsumeHost,
    mark_consume_start,
    reset_retry_topic,
)
from aiorocketmq.client.errors import ClientStateError
from aiorocketmq.client.listener import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from aiorocketmq.client.process_queue import ProcessQueue
from aiorocketmq.common.message import MessageExt, MessageQueue

__all__ = ["Delivery", "DeliveryStream", "IteratorConsumeService", "MessageStream"]

log = logging.getLogger(__name__)

_Taken = tuple[MessageExt, ProcessQueue, MessageQueue]


class Settle(enum.Enum):
    """What the end of a loop does with the message in hand."""

    ACK = "ack"
    NACK = "nack"
    LEAVE = "leave"  # uncommitted: consumed again after a restart or rebalance


class IteratorConsumeService(ConcurrentConsumeService):
    """The consume service of a push consumer read with ``async for`` (module docstring).

    Args:
        host: the push consumer.
    """

    def __init__(self, host: ConsumeHost) -> None:
        super().__init__(host, None, 0)
        self._buffer: deque[_Taken] = deque()
        self._streams: list[_Stream[Any]] = []
        self._unsettled: set[Delivery] = set()
        self._ended = False

    async def shutdown(self, settle: Settle = Settle.ACK) -> None:
        """Settle what the loops hold, end every stream, then stop as the parent does.

        Args:
            settle: the implicit streams' messages in hand: ACK when the loops
                ended normally, NACK when one raised, LEAVE when cancelled.
        """
        for stream in list(self._streams):
            await stream.close(settle)
        if self._unsettled:
            log.warning(
                "consumer shut down with %d unsettled deliveries group=%s: their offsets "
                "stay uncommitted, so they are consumed again",
                len(self._unsettled),
                self.host.group,
            )
        self._ended = True
        self._queue.put_nowait(None)
        await super().shutdown()

    def open_messages(self) -> MessageStream:
        """A new implicit stream; loops left by ``break`` are done with their message."""
        return MessageStream(self, self._abandoned())

    def open_deliveries(self) -> DeliveryStream:
        """A new explicit stream."""
        return DeliveryStream(self, self._abandoned())

    def _abandoned(self) -> list[_Stream[Any]]:
        """Streams a new loop replaces: an implicit one's message in hand is acknowledged."""
        return list(self._streams)

    def _register(self, stream: _Stream[Any]) -> None:
        self._streams.append(stream)

    def _unregister(self, stream: _Stream[Any]) -> None:
        if stream in self._streams:
            self._streams.remove(stream)

    async def take(self) -> _Taken | None:
        """The next message to hand out, or None once the consumer shut down."""
        while True:
            while self._buffer:
                taken = self._buffer.popleft()
                if not taken[1].dropped:  # a queue rebalanced away: its new owner reads it
                    return taken
            if self._ended:
                return None
            item = await self._queue.get()
            if item is None:
                self._queue.put_nowait(None)  # for any other loop
                return None
            msgs, pq, mq = item
            if pq.dropped:
                continue
            reset_retry_topic(msgs, self.host.group)
            mark_consume_start(msgs)
            self._buffer.extend((msg, pq, mq) for msg in msgs)

    async def settle(self, taken: _Taken, ok: bool, delay_level: int = 0) -> None:
        """Acknowledge (``ok``) or send back one message; nothing if its queue was dropped."""
        msg, pq, mq = taken
        if pq.dropped:
            return
        status = (
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            if ok
            else ConsumeConcurrentlyStatus.RECONSUME_LATER
        )
        context = ConsumeConcurrentlyContext(mq, delay_level_when_next_consume=delay_level)
        await self._process_result(status, context, [msg], pq, mq)


T = TypeVar("T")


class _Stream(Generic[T]):
    """What both streams share: the async iterator and async context manager."""

    def __init__(
        self,
        service: IteratorConsumeService,
        replaces: list[_Stream[Any]],
    ) -> None:
        self._service = service
        self._replaces = replaces
        self._closed = False
        service._register(self)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        for stream in self._replaces:
            await stream.close(Settle.ACK)
        self._replaces = []
        if self._closed:
            raise StopAsyncIteration
        await self._done_with_previous()
        taken = await self._service.take()
        if taken is None:
            await self.close(Settle.LEAVE)
            raise StopAsyncIteration
        return self._hand_out(taken)

    async def _done_with_previous(self) -> None:
        """The loop asked for the next message (implicit mode acknowledges here)."""

    def _hand_out(self, taken: _Taken) -> T:
        raise NotImplementedError

    async def close(self, settle: Settle = Settle.ACK) -> None:
        """End this stream (idempotent); ``settle`` says what happens to a message in hand."""
        self._closed = True
        self._service._unregister(self)

    async def aclose(self) -> None:
        """End this stream; a message in hand is sent back (``contextlib.aclosing``).

        ``aclosing`` calls this however the loop ended, so it cannot tell a
        ``break`` from an exception: it keeps what closing the former async
        generator did. ``async with stream`` knows the difference.
        """
        await self.close(Settle.NACK)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close(settle_for(exc))


def settle_for(exc: BaseException | None) -> Settle:
    """How a loop ended: normally (ACK), raising (NACK) or cancelled/interrupted (LEAVE)."""
    if exc is None:
        return Settle.ACK
    return Settle.NACK if isinstance(exc, Exception) else Settle.LEAVE


class MessageStream(_Stream[MessageExt]):
    """``async for msg in consumer.messages()``: implicit acknowledgement (module docstring)."""

    def __init__(
        self,
        service: IteratorConsumeService,
        replaces: list[_Stream[Any]],
    ) -> None:
        super().__init__(service, replaces)
        self._in_hand: _Taken | None = None

    async def _done_with_previous(self) -> None:
        taken, self._in_hand = self._in_hand, None
        if taken is not None:
            await self._service.settle(taken, ok=True)

    def _hand_out(self, taken: _Taken) -> MessageExt:
        self._in_hand = taken
        return taken[0]

    async def close(self, settle: Settle = Settle.ACK) -> None:
        """End the stream; the message in hand is acknowledged, sent back or left."""
        await super().close(settle)
        taken, self._in_hand = self._in_hand, None
        if taken is not None and settle is not Settle.LEAVE:
            await self._service.settle(taken, ok=settle is Settle.ACK)


class DeliveryStream(_Stream["Delivery"]):
    """``async for delivery in consumer.deliveries()``: explicit acknowledgement."""

    def _hand_out(self, taken: _Taken) -> Delivery:
        delivery = Delivery(self._service, taken)
        self._service._unsettled.add(delivery)
        return delivery


class Delivery:
    """One message of ``consumer.deliveries()``, to ``ack()`` or ``nack()`` exactly once.

    ``async with delivery:`` acknowledges when the block ends normally and sends
    the message back when it raises (the exception goes on); a delivery already
    settled inside the block is left as it is.

    Attributes:
        message: the message.
    """

    __slots__ = ("_service", "_taken", "message", "settled")

    def __init__(self, service: IteratorConsumeService, taken: _Taken) -> None:
        self._service = service
        self._taken = taken
        self.message: MessageExt = taken[0]
        self.settled: str | None = None  # "ack" or "nack" once settled

    @property
    def message_queue(self) -> MessageQueue:
        """The queue the message came from."""
        return self._taken[2]

    async def ack(self) -> None:
        """The message is consumed: its queue's offset may move past it.

        Raises:
            ClientStateError: already acknowledged or sent back.
        """
        self._mark("ack")
        await self._service.settle(self._taken, ok=True)

    async def nack(self, delay_level: int = 0) -> None:
        """Consume the message again later (RECONSUME_LATER for this one message).

        Args:
            delay_level: 0 lets the broker choose (3 + reconsume times), a level
                picks the delay, -1 sends it straight to the DLQ.

        Raises:
            ClientStateError: already acknowledged or sent back.
        """
        self._mark("nack")
        await self._service.settle(self._taken, ok=False, delay_level=delay_level)

    def _mark(self, how: str) -> None:
        if self.settled is not None:
            raise ClientStateError(
                f"message {self.message.msg_id} was already settled ({self.settled})"
            )
        self.settled = how
        self._service._unsettled.discard(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.settled is not None:
            return
        how = settle_for(exc)
        if how is Settle.ACK:
            await self.ack()
        elif how is Settle.NACK:
            await self.nack()
        # LEAVE (cancelled): unsettled, so consumed again after a restart or rebalance.

    def __repr__(self) -> str:
        return f"Delivery({self.message.topic!r}, msg_id={self.message.msg_id!r}, {self.settled})"
