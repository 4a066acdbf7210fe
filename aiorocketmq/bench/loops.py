"""The benchmark load: producer tasks, a push consumer, and the reporting loop.

Owns: ``BenchOptions`` (Java's flags, parsed by ``cli/bench.py``), ``run_producer`` and
``run_consumer`` (each returns when its ``--messages``/``--seconds`` budget is spent or
the stop event is set), and ``report_loop`` (a snapshot every second, a report line
every ``report_interval`` seconds, a progress line on a terminal).

Producer semantics follow ``benchmark/Producer.java``: ``threads`` concurrent senders
(tasks here), a random alphanumeric body of ``size`` bytes, optional keys, tags
``tag<now % tagCount>``, user properties up to ``property_size`` bytes, delay level;
a broker error counts as "Response Failed", any other failure as "Send Failed" (and
that sender backs off, as Java's threads sleep). ``batch`` > 1 sends SEND_BATCH_MESSAGE
batches (Java's BatchProducer); each message counts once.

Must not: print directly (``write`` is given) or swallow the stop event.
"""

from __future__ import annotations

import asyncio
import json
import random
import string
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiorocketmq.bench.stats import (
    ConsumerStats,
    ProducerStats,
    Window,
    consumer_line,
    consumer_report,
    consumer_summary,
    producer_line,
    producer_report,
)
from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    MessageExt,
    MQBrokerError,
    MQClientError,
    Producer,
    PushConsumer,
    PushConsumerConfig,
)
from aiorocketmq.common.message import Message

__all__ = ["BenchOptions", "report_loop", "run_consumer", "run_producer"]

Write = Callable[[str], None]
FAILURE_BACKOFF_S = 0.5


@dataclass
class BenchOptions:
    """Both tools' options (Java's defaults; ours are marked)."""

    namesrv: str | None = None
    topic: str = "BenchmarkTest"
    threads: int = 64
    size: int = 128
    key_enable: bool = False
    property_size: int = 0
    tag_count: int = 0
    quantity: int = 0
    delay_enable: bool = False
    delay_level: int = 1
    batch: int = 1  # ours: messages per SEND_BATCH_MESSAGE
    group: str = "benchmark_consumer"
    group_suffix: bool = False
    expression: str = "*"
    fail_rate: float = 0.0
    seconds: float = 0.0  # ours: stop after this long (0: run until -q or a signal)
    report_interval: float = 10.0  # ours: Java prints every 10 s
    json: bool = False  # ours: JSON lines instead of Java's text


async def report_loop(
    snapshot: Callable[[], tuple[float, ...]],
    report: Callable[[Window], str],
    options: BenchOptions,
    write: Write,
    progress: Callable[[], str] | None,
) -> None:
    """Snapshot every second, print a report every ``report_interval`` (until cancelled)."""
    window = Window(int(options.report_interval) + 1)
    window.add(snapshot())
    next_report = time.monotonic() + options.report_interval
    tick = min(1.0, options.report_interval)
    while True:
        await asyncio.sleep(tick)
        window.add(snapshot())
        if progress is not None:
            progress()
        if time.monotonic() >= next_report and window.ready():
            write(report(window) + "\n")
            next_report += options.report_interval


def _body(size: int) -> bytes:
    alphabet = string.ascii_letters + string.digits
    return "".join(random.choices(alphabet, k=size)).encode()


def _message(options: BenchOptions, body: bytes, seq: int) -> Message:
    msg = Message(options.topic, body)
    if options.key_enable:
        msg.keys = str(seq)
    if options.tag_count > 0:
        msg.tags = f"tag{int(time.time() * 1000) % options.tag_count}"
    if options.delay_enable:
        msg.delay_time_level = options.delay_level
    filled, i = 0, 0
    while filled < options.property_size:
        value = _body(16).decode()
        msg.put_user_property(f"prop{i}", value)
        filled += len(f"prop{i}") + len(value) + 2
        i += 1
    return msg


class _Budget:
    """Messages left to send (unbounded when ``quantity`` is 0) and the stop signal."""

    def __init__(self, options: BenchOptions, stop: asyncio.Event) -> None:
        self.left = options.quantity if options.quantity > 0 else -1
        self.stop = stop
        self.deadline = time.monotonic() + options.seconds if options.seconds > 0 else None
        self.seq = 0

    def take(self, n: int) -> int:
        """How many of ``n`` may go now (0: done)."""
        if self.stop.is_set() or (self.deadline is not None and time.monotonic() >= self.deadline):
            return 0
        if self.left >= 0:
            n = min(n, self.left)
            self.left -= n
        self.seq += n
        return n


async def _sender(producer: Producer, options: BenchOptions, stats: ProducerStats,
                  budget: _Budget, body: bytes) -> None:  # fmt: skip
    while (n := budget.take(options.batch)) > 0:
        msgs = [_message(options, body, budget.seq - i) for i in range(n)]
        start = time.perf_counter()
        try:
            if n == 1 and options.batch == 1:
                await producer.send(msgs[0])
            else:
                await producer.send_batch(msgs)
        except MQBrokerError:
            stats.response_failed += n
            await asyncio.sleep(FAILURE_BACKOFF_S)
            continue
        except MQClientError:
            stats.send_failed += n
            await asyncio.sleep(FAILURE_BACKOFF_S)
            continue
        rt_ms = (time.perf_counter() - start) * 1000
        for _ in range(n):
            stats.sent(rt_ms)


async def run_producer(options: BenchOptions, write: Write, stop: asyncio.Event,
                       progress: Write | None = None) -> ProducerStats:  # fmt: skip
    """Send until the budget is spent or ``stop`` is set; print reports and the summary."""
    stats, body = ProducerStats(), _body(options.size)
    budget = _Budget(options, stop)

    def report(window: Window, done: bool = False) -> str:
        return producer_line(producer_report(window, stats, done=done), as_json=options.json)

    def show() -> str:
        line = f"\rsent {stats.send_success} failed {stats.send_failed + stats.response_failed}"
        if progress is not None:
            progress(line)
        return line

    started = Window(2)
    started.add(stats.snapshot())
    async with Producer("benchmark_producer", options.namesrv) as producer:
        reporter = asyncio.create_task(report_loop(stats.snapshot, report, options, write, show))
        try:
            senders = [
                _sender(producer, options, stats, budget, body) for _ in range(options.threads)
            ]
            await asyncio.gather(*senders)
        finally:
            reporter.cancel()
            await asyncio.gather(reporter, return_exceptions=True)
    started.add(stats.snapshot())
    write(report(started, done=True) + "\n")
    return stats


async def run_consumer(options: BenchOptions, write: Write, stop: asyncio.Event,
                       progress: Write | None = None) -> ConsumerStats:  # fmt: skip
    """Consume until ``--messages``/``--seconds`` is reached or ``stop`` is set."""
    stats = ConsumerStats()
    group = options.group
    if options.group_suffix:
        group = f"{group}_{int(time.time() * 1000) % 100}"
    enough = asyncio.Event()

    # async: it counts into shared stats and sets an asyncio.Event, and measures the
    # client, not a thread hop (a def listener would run on the consume thread pool)
    async def listener(msgs: list[MessageExt], _context: Any) -> ConsumeConcurrentlyStatus:
        now = int(time.time() * 1000)
        failed = options.fail_rate > 0 and random.random() < options.fail_rate
        for msg in msgs:
            stats.consumed(msg.born_timestamp, msg.store_timestamp, now, failed)
        if options.quantity > 0 and stats.received >= options.quantity:
            enough.set()
        if failed:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def show() -> str:
        line = f"\rconsumed {stats.received} failed {stats.failed}"
        if progress is not None:
            progress(line)
        return line

    config = PushConsumerConfig(consume_thread_max=options.threads)
    consumer = PushConsumer(group, options.namesrv, config=config)
    consumer.subscribe(options.topic, options.expression)
    consumer.register_message_listener(listener)
    await consumer.start()
    started = {"started": True, "group": group}
    write((json.dumps(started) if options.json else "Consumer Started.") + "\n")

    def report(window: Window) -> str:
        return consumer_line(consumer_report(window, stats), as_json=options.json)

    reporter = asyncio.create_task(report_loop(stats.snapshot, report, options, write, show))
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(enough.wait())]
    try:
        timeout = options.seconds if options.seconds > 0 else None
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in [*waits, reporter]:
            task.cancel()
        await asyncio.gather(*waits, reporter, return_exceptions=True)
        await consumer.shutdown()
    write(consumer_summary(stats, as_json=options.json) + "\n")
    return stats
