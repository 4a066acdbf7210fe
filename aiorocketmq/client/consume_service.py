"""Consume services: how pulled messages reach a push consumer's listener.

Owns (Java 4.9.8 ``ConsumeMessageConcurrentlyService`` /
``ConsumeMessageOrderlyService``):

- ``ConcurrentConsumeService``: ``consume_thread_max`` worker tasks take batches of
  ``consume_message_batch_max_size`` messages and hand them to the listener
  (``listener.ListenerRunner`` decides where it runs and what its answer means); a
  failed batch is sent back to the broker (CONSUMER_SEND_MSG_BACK, clustering only;
  broadcasting drops it) and what could not be sent back is consumed again locally
  5 s later; then the queue's offset becomes the smallest offset still held;
- ``OrderlyConsumeService``: one consume at a time per queue (``pq.consume_lock``),
  only while this client holds the queue's broker lock (clustering), messages
  taken in offset order; SUSPEND retries locally (1 s apart by default) until
  ``max_reconsume_times``, then the message goes to ``%RETRY%`` (and so to the
  DLQ) and consumption moves on; a consume runs at most 60 s before yielding;
- ``RetrySender``: the send-back itself.

The ``async for`` services (no listener) are in ``message_stream``.

Must not: pull, rebalance or keep offsets itself (the host's offset store does).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any, Protocol

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import BrokerNotFoundError, MQClientError
from aiorocketmq.client.instance import ClientInstance
from aiorocketmq.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    Listener,
    ListenerRunner,
)
from aiorocketmq.client.offset_store import LocalFileOffsetStore, RemoteBrokerOffsetStore
from aiorocketmq.client.process_queue import ProcessQueue
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.stats import ConsumerStatsManager
from aiorocketmq.common.constants import retry_topic
from aiorocketmq.common.message import Message, MessageExt, MessageQueue
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.protocol_bodies import MessageModel
from aiorocketmq.runtime.work_queue import WorkQueue

# The statuses, contexts and Listener are re-exported: they lived here first.
__all__ = [
    "ConcurrentConsumeService",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeHost",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "Listener",
    "OrderlyConsumeService",
    "RetrySender",
    "mark_consume_start",
    "reset_retry_topic",
]

log = logging.getLogger(__name__)

SEND_BACK_TIMEOUT_MS = 5_000
"""Java's sendMessageBack timeout."""

SUBMIT_LATER_S = 5.0
"""A batch that could not be sent back is consumed again this much later (Java: 5 s)."""

RUN_AHEAD_MESSAGES = 32
"""An orderly queue's messages a threaded listener is given in one trip to its threads,
one batch per call as ever (Java's orderly consume takes one batch per request)."""

MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0
"""An orderly consume yields after this long (``rocketmq.client.maxTimeConsumeContinuously``)."""


class ConsumeHost(Protocol):
    """What the consume services need from their push consumer."""

    group: str
    model: MessageModel
    consume_message_batch_max_size: int
    suspend_current_queue_time_millis: int

    @property
    def max_reconsume_times(self) -> int:
        """Retries before the DLQ (-1: unlimited, orderly)."""

    @property
    def offset_store(self) -> RemoteBrokerOffsetStore | LocalFileOffsetStore:
        """The consumer's offset store."""

    async def send_message_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        """CONSUMER_SEND_MSG_BACK (falling back to a %RETRY% send); False if both failed."""

    async def send_message_back_orderly(self, msg: MessageExt) -> bool:
        """Send an orderly message that used up its retries to %RETRY% (then the DLQ)."""

    async def lock_and_check(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for ``mq``; True when held."""

    def is_running(self) -> bool:
        """Whether the consumer still runs."""

    @property
    def stats(self) -> ConsumerStatsManager:
        """Where consume RT and OK/failed counts go (the instance's)."""


def reset_retry_topic(msgs: list[MessageExt], group: str) -> None:
    """Messages pulled from ``%RETRY%<group>`` get their original topic back."""
    group_topic = retry_topic(group)
    for msg in msgs:
        if msg.topic == group_topic:  # first: a property read costs more than this
            original = msg.get_property(MessageConst.PROPERTY_RETRY_TOPIC)
            if original is not None:
                msg.topic = original


def mark_consume_start(msgs: list[MessageExt]) -> None:
    now = str(int(time.time() * 1000))
    for msg in msgs:
        msg.put_property(MessageConst.PROPERTY_CONSUME_START_TIMESTAMP, now)


class ConcurrentConsumeService:
    """Concurrent consumption by a pool of worker tasks (see the module docstring).

    Args:
        host: the push consumer.
        runner: runs the concurrent listener (None: the ``async for`` subclass).
        workers: how many batches are consumed at the same time.
    """

    def __init__(
        self,
        host: ConsumeHost,
        runner: ListenerRunner[ConsumeConcurrentlyStatus] | None,
        workers: int,
    ) -> None:
        self.host = host
        self.runner = runner
        self.workers = workers
        # None is the end marker ``IteratorConsumeService`` puts at shutdown.
        self._queue: WorkQueue[tuple[list[MessageExt], ProcessQueue, MessageQueue] | None] = (
            WorkQueue()
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._later: set[asyncio.TimerHandle] = set()
        # A threaded listener: batches go straight to its threads, no worker task
        # and no coroutine per batch (``_consume_threaded``).
        self._direct = runner is not None and runner.threaded
        self._stopped = False
        self._sending_back: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start the worker tasks (none for a threaded listener: see ``submit``)."""
        if self._direct:
            return
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"consume-{self.host.group}-{i}")
            for i in range(self.workers)
        ]

    async def shutdown(self) -> None:
        """Stop the workers (a batch being consumed is abandoned; its offset not committed)."""
        self._stopped = True
        for handle in self._later:
            handle.cancel()
        self._later.clear()
        tasks = [*self._tasks, *self._sending_back]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks = []
        if self.runner is not None:
            await self.runner.shutdown()

    def submit(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, _dispatch: bool = True
    ) -> None:
        """Queue pulled messages for the workers (a threaded listener: its threads), in
        batches."""
        size = max(1, self.host.consume_message_batch_max_size)
        for start in range(0, len(msgs), size):
            if self._direct:
                self._consume_threaded(msgs[start : start + size], pq, mq)
            else:
                self._queue.put_nowait((msgs[start : start + size], pq, mq))

    def _consume_threaded(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """A worker's consume for a threaded listener, its answer handled in a callback:
        a pull of 32 messages costs the loop no task switch per message. Only a batch
        to send back (RECONSUME_LATER, clustering) gets a task."""
        assert self.runner is not None
        if self._stopped:
            return  # a pull that lands during shutdown: consumed again after a restart
        context, started = self._begin(msgs, mq)

        def done(status: ConsumeConcurrentlyStatus) -> None:
            if self._stopped:
                return  # shut down meanwhile: the batch stays uncommitted, as a worker's
            sending_back = self._end(status, context, msgs, pq, mq, started)
            if sending_back is not None:
                task = asyncio.create_task(sending_back)
                self._sending_back.add(task)
                task.add_done_callback(self._sending_back.discard)

        self.runner.submit(msgs, context, done, lambda: pq.dropped)

    def _submit_later(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        loop = asyncio.get_running_loop()

        def again() -> None:
            self._later.discard(handle)
            self.submit(msgs, pq, mq)

        handle = loop.call_later(SUBMIT_LATER_S, again)
        self._later.add(handle)

    async def _worker(self) -> None:
        runner = self.runner
        assert runner is not None  # workers run only with a listener
        while True:
            item = await self._queue.get()
            if item is None:
                return
            msgs, pq, mq = item
            if pq.dropped:
                continue
            # A batch's consume inline, no coroutine of its own: one per message.
            try:
                context, started = self._begin(msgs, mq)
                status = await runner.call(msgs, context)
                sending_back = self._end(status, context, msgs, pq, mq, started)
                if sending_back is not None:
                    await sending_back
            except Exception:
                log.exception("consume failed group=%s mq=%s", self.host.group, mq)

    def _begin(
        self, msgs: list[MessageExt], mq: MessageQueue
    ) -> tuple[ConsumeConcurrentlyContext, float]:
        """Before a listener call: the retry topic reset, the consume start stamped, its
        context and the clock."""
        reset_retry_topic(msgs, self.host.group)
        mark_consume_start(msgs)
        return ConsumeConcurrentlyContext(mq), time.monotonic()

    def _end(  # noqa: PLR0917 - a call's state, positional on every message
        self, status: ConsumeConcurrentlyStatus, context: ConsumeConcurrentlyContext,
        msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, started: float,
    ) -> Coroutine[Any, Any, None] | None:  # fmt: skip
        """After a listener call: its time counted, then its batch settled, or the send-back
        to run when it asked to consume later (clustering); None when nothing is left."""
        host = self.host
        host.stats.inc_consume_rt(host.group, mq.topic, (time.monotonic() - started) * 1000)
        if pq.dropped:
            return None
        if status is ConsumeConcurrentlyStatus.RECONSUME_LATER and (
            host.model is not MessageModel.BROADCASTING
        ):
            return self._process_result(status, context, msgs, pq, mq)
        self._settle(status, msgs, [], pq, mq)  # no coroutine for the usual answer
        return None

    async def _process_result(
        self,
        status: ConsumeConcurrentlyStatus,
        context: ConsumeConcurrentlyContext,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        """Java's ``processConsumeResult`` with ackIndex all-or-nothing."""
        failed: list[MessageExt] = []
        if status is ConsumeConcurrentlyStatus.RECONSUME_LATER and (
            self.host.model is not MessageModel.BROADCASTING
        ):
            for msg in msgs:
                level = context.delay_level_when_next_consume
                if not await self.host.send_message_back(msg, level, mq.broker_name):
                    msg.reconsume_times += 1
                    failed.append(msg)
        self._settle(status, msgs, failed, pq, mq)

    def _settle(
        self,
        status: ConsumeConcurrentlyStatus,
        msgs: list[MessageExt],
        failed: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> None:
        """Count the batch, consume ``failed`` (not sent back) again later, and move the
        queue's offset past the rest."""
        stats, group = self.host.stats, self.host.group
        if status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            stats.inc_consume_ok(group, mq.topic, len(msgs))
        else:
            stats.inc_consume_failed(group, mq.topic, len(msgs))
        if (
            status is ConsumeConcurrentlyStatus.RECONSUME_LATER
            and self.host.model is MessageModel.BROADCASTING
        ):
            for msg in msgs:
                log.warning("BROADCASTING, the message consume failed, drop it: %s", msg.msg_id)
        done = msgs
        if failed:
            done = [m for m in msgs if m not in failed]
            self._submit_later(failed, pq, mq)
        offset = pq.remove_messages(done)
        if offset >= 0 and not pq.dropped:
            self.host.offset_store.update_offset(mq, offset, increase_only=True)


class OrderlyConsumeService:
    """Orderly consumption, one consume per queue at a time (see the module docstring).

    Args:
        host: the push consumer.
        runner: runs the orderly listener (a ``def`` one on the thread pool: still
            one consume per queue at a time, several queues at once).
    """

    def __init__(self, host: ConsumeHost, runner: ListenerRunner[ConsumeOrderlyStatus]) -> None:
        self.host = host
        self.runner = runner
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Nothing to start: a task runs per queue while it has messages."""

    async def shutdown(self) -> None:
        """Cancel the running consumes."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        await self.runner.shutdown()

    def submit(
        self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, dispatch: bool = True
    ) -> None:
        """Start a consume of ``mq`` when the pull said so (``dispatch``)."""
        if dispatch:
            self._spawn(pq, mq, 0.0)

    def _spawn(self, pq: ProcessQueue, mq: MessageQueue, delay_s: float) -> None:
        task = asyncio.create_task(self._run(pq, mq, delay_s), name=f"orderly-{mq}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, pq: ProcessQueue, mq: MessageQueue, delay_s: float) -> None:
        if delay_s > 0:
            await asyncio.sleep(delay_s)
        if pq.dropped or not self.host.is_running():
            return
        try:
            async with pq.consume_lock:
                await self._consume_locked(pq, mq)
        except Exception:
            log.exception("orderly consume failed group=%s mq=%s", self.host.group, mq)
            self._spawn(pq, mq, 1.0)

    def _lock_ok(self, pq: ProcessQueue) -> bool:
        if self.host.model is MessageModel.BROADCASTING:
            return True
        return pq.locked and not pq.is_lock_expired()

    async def _consume_locked(self, pq: ProcessQueue, mq: MessageQueue) -> None:
        """Java's ``ConsumeRequest.run`` (the queue's consume lock is held)."""
        if not self._lock_ok(pq):
            await self._try_lock_later(pq, mq, 0.1)
            return
        started = time.monotonic()
        while not pq.dropped:
            if not self._lock_ok(pq):
                await self._try_lock_later(pq, mq, 0.01)
                return
            if time.monotonic() - started > MAX_TIME_CONSUME_CONTINUOUSLY_S:
                self._spawn(pq, mq, 0.01)
                return
            if self.runner.threaded:
                if not await self._consume_run(pq, mq):
                    return
                continue
            msgs = pq.take_messages(max(1, self.host.consume_message_batch_max_size))
            if not msgs:
                return
            reset_retry_topic(msgs, self.host.group)
            mark_consume_start(msgs)
            context = ConsumeOrderlyContext(mq)
            began = time.monotonic()
            status = await self.runner.call(msgs, context)
            self.host.stats.inc_consume_rt(
                self.host.group, mq.topic, (time.monotonic() - began) * 1000
            )
            if pq.dropped:
                return
            if not await self._process_result(status, context, msgs, pq, mq):
                return

    async def _consume_run(self, pq: ProcessQueue, mq: MessageQueue) -> bool:
        """A threaded listener's next batches of ``mq`` (up to ``RUN_AHEAD_MESSAGES``),
        called one after the other in one trip to its threads (``call_run``): what
        succeeded is committed, what did not run goes back, and a failed batch is
        answered as one call's would be. True to go on."""
        size = max(1, self.host.consume_message_batch_max_size)
        batches: list[list[MessageExt]] = []
        while len(batches) < max(1, RUN_AHEAD_MESSAGES // size):
            msgs = pq.take_messages(size)
            if msgs:
                batches.append(msgs)
            if len(msgs) < size:  # the queue is empty: leave the next take to the loop
                break
        if not batches:
            return False
        for msgs in batches:
            reset_retry_topic(msgs, self.host.group)
        contexts = [ConsumeOrderlyContext(mq) for _ in batches]

        def before(msgs: list[MessageExt]) -> bool:  # on the listener's thread
            if pq.dropped or not self._lock_ok(pq) or not self.host.is_running():
                return False
            mark_consume_start(msgs)  # as each call starts, not as the run was taken
            return True

        runs = await self.runner.call_run(list(zip(batches, contexts, strict=True)), before)
        stats, group = self.host.stats, self.host.group
        for _status, ms in runs:
            stats.inc_consume_rt(group, mq.topic, ms)
        if pq.dropped:
            return False
        done = 0
        while done < len(runs) and runs[done][0] is ConsumeOrderlyStatus.SUCCESS:
            done += 1
        pq.make_message_to_consume_again(m for msgs in batches[done:] for m in msgs)
        if done:
            stats.inc_consume_ok(group, mq.topic, sum(len(msgs) for msgs in batches[:done]))
            offset = pq.commit()
            if offset >= 0:
                self.host.offset_store.update_offset(mq, offset, increase_only=False)
        if done == len(runs):
            return True  # all ran, or ``go_on`` stopped the run: the loop checks again
        failed = pq.take_messages(len(batches[done]))  # the same messages, smallest first
        return await self._process_result(runs[done][0], contexts[done], failed, pq, mq)

    async def _try_lock_later(self, pq: ProcessQueue, mq: MessageQueue, delay_s: float) -> None:
        """Try the broker lock again soon; consume again at once if it was taken."""
        locked = await self.host.lock_and_check(mq)
        self._spawn(pq, mq, delay_s if locked else 3.0)

    async def _process_result(
        self,
        status: ConsumeOrderlyStatus,
        context: ConsumeOrderlyContext,
        msgs: list[MessageExt],
        pq: ProcessQueue,
        mq: MessageQueue,
    ) -> bool:
        """Commit or suspend (Java's processConsumeResult, autoCommit); True to go on."""
        go_on = True
        stats, group = self.host.stats, self.host.group
        if status is ConsumeOrderlyStatus.SUCCESS:
            stats.inc_consume_ok(group, mq.topic, len(msgs))
        else:
            stats.inc_consume_failed(group, mq.topic, len(msgs))
        if status is ConsumeOrderlyStatus.SUCCESS:
            offset = pq.commit()
        elif await self._check_reconsume_times(msgs):
            pq.make_message_to_consume_again(msgs)
            pause = context.suspend_current_queue_time_millis
            if pause < 0:
                pause = self.host.suspend_current_queue_time_millis
            self._spawn(pq, mq, min(max(pause, 10), 30_000) / 1000)
            offset, go_on = -1, False
        else:
            offset = pq.commit()
        if offset >= 0 and not pq.dropped:
            self.host.offset_store.update_offset(mq, offset, increase_only=False)
        return go_on

    async def _check_reconsume_times(self, msgs: list[MessageExt]) -> bool:
        """True when the messages must be consumed again; those past the limit are sent back."""
        suspend = False
        limit = self.host.max_reconsume_times
        for msg in msgs:
            if limit >= 0 and msg.reconsume_times >= limit:
                msg.put_property(MessageConst.PROPERTY_RECONSUME_TIME, str(msg.reconsume_times))
                if not await self.host.send_message_back_orderly(msg):
                    suspend = True
                    msg.reconsume_times += 1
            else:
                suspend = True
                msg.reconsume_times += 1
        return suspend


class RetrySender:
    """Sends failed messages back for retry (Java's ``sendMessageBack`` of the consumer).

    Args:
        instance: the consumer's client instance.
        group: the consumer group.
        client_config: the consumer's client settings (the inner producer's, renamed).
        max_reconsume_times: sent with every send-back (-1: unlimited).
    """

    def __init__(
        self,
        instance: ClientInstance,
        group: str,
        client_config: ClientConfig,
        max_reconsume_times: int,
    ) -> None:
        self.instance = instance
        self.group = group
        self.client_config = client_config
        self.max_reconsume_times = max_reconsume_times
        self._producer: Producer | None = None

    async def send_back(self, msg: MessageExt, delay_level: int, broker_name: str) -> bool:
        """CONSUMER_SEND_MSG_BACK to ``broker_name``'s master; a %RETRY% send if that fails."""
        address = self.instance.find_broker_address_in_publish(broker_name)
        try:
            if address is None:
                raise BrokerNotFoundError(broker_name)
            await self.instance.api.consumer_send_message_back(
                address,
                msg,
                self.group,
                delay_level,
                SEND_BACK_TIMEOUT_MS,
                max_reconsume_times=self.max_reconsume_times,
            )
            return True
        except MQClientError as exc:
            log.warning("send back failed, sending to %%RETRY%% msg=%s error=%s", msg.msg_id, exc)
        return await self.send_to_retry_topic(msg, msg.reconsume_times + 1)

    async def send_to_retry_topic(self, msg: MessageExt, reconsume_times: int) -> bool:
        """A copy of ``msg`` to %RETRY%<group> through the inner producer (CLIENT_INNER_PRODUCER).

        The broker sends it to the DLQ when ``reconsume_times`` reached the maximum.
        """
        new = Message(
            retry_topic(self.group), msg.body, flag=msg.flag, properties=dict(msg.properties)
        )
        origin = msg.get_property(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID)
        new.put_property(MessageConst.PROPERTY_ORIGIN_MESSAGE_ID, origin or msg.msg_id)
        new.put_property(MessageConst.PROPERTY_RETRY_TOPIC, msg.topic)
        new.put_property(MessageConst.PROPERTY_RECONSUME_TIME, str(reconsume_times))
        limit = self.max_reconsume_times if self.max_reconsume_times >= 0 else 2**31 - 1
        new.put_property(MessageConst.PROPERTY_MAX_RECONSUME_TIMES, str(limit))
        new.clear_property(MessageConst.PROPERTY_TRANSACTION_PREPARED)
        new.delay_time_level = 3 + msg.reconsume_times
        try:
            if self._producer is None:
                name = f"{self.client_config.instance_name}-inner"
                inner = self.client_config.model_copy(update={"instance_name": name})
                self._producer = Producer("CLIENT_INNER_PRODUCER", client_config=inner)
                await self._producer.start()
            await self._producer.send(new)
            return True
        except MQClientError as exc:
            log.warning("send to retry topic failed msg=%s error=%s", msg.msg_id, exc)
            return False

    async def shutdown(self) -> None:
        """Stop the inner producer, if one was started."""
        if self._producer is not None:
            await self._producer.shutdown()
