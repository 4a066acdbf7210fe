"""Drive the stock C++ client (PyPI ``rocketmq`` 0.4.4) against a real name server.

Owns: three argv-driven roles, each run in its own process (the C++ client blocks
in native code, starts its own threads and writes logs under
``$HOME/logs/rocketmq-cpp``, capped here to two 8 MiB files at WARN):

- ``produce NAMESRV TOPIC MODE N [--prefix P] [--shards S] [--body-size B]``:
  sends N messages, MODE ``sync``, ``oneway``, ``orderly`` (``send_orderly``
  with the sharding key as the selector argument, so shard ``s`` goes to queue
  ``s % queues``) or ``batch``. Message ``i`` has key ``P%06d``, tag ``TAGS[i % 3]``, shard
  ``i % S`` and sequence ``i // S`` within its shard; its body starts with
  ``key|tag|shard|seq|``. MODE ``batch`` sends ``--batch-size`` (32) messages
  per ``send_batch`` (one SEND_MESSAGE with ``batch`` set). Prints ``PRODUCED
  mode=.. count=.. errors=.. seconds=.. started=<epoch s>`` (seconds: the send
  loop; started: when it began); ``--results FILE`` gets ``key offset msgId``
  per sync or orderly send, from the client's SendResult.
- ``push NAMESRV TOPIC GROUP EXPRESSION EXPECTED TIMEOUT_S OUT``: a stock
  PushConsumer (``--orderly``: the orderly one, which locks its queues on the
  broker and consumes each in order) subscribed with EXPRESSION; writes ``key tag queue offset`` per
  message to OUT; once it has seen EXPECTED distinct keys it lingers
  ``--linger-s`` (so late duplicates or foreign messages still show up), then
  prints ``CONSUMED count=.. distinct=.. seconds=.. span=.. stalls=.. stalled=..``
  (span: first to last delivery; stalls: pauses of at least ``STALL_S`` between
  deliveries, stalled: their seconds) and shuts down; it also
  stops when ``--stop-file`` appears (for consumers sharing a group, whose
  share is not known in advance); ``--work-ms`` makes each message take that
  long; ``--retry-every N`` answers RECONSUME_LATER to the first delivery of every
  N-th key (the retry flow) and writes ``reconsumeTimes topic`` too. Exits 0 either
  way; the caller judges the file.
- ``--access-key AK --secret-key SK`` (before the role): sign every request
  (``set_session_credentials``), for brokers with ACL on.
- ``pull NAMESRV TOPIC GROUP EXPRESSION OUT``: a stock PullConsumer reading every
  queue from offset 0 until NO_NEW_MSG (``PullConsumer.pull`` iterates queues);
  writes ``queue offset key tag msgId body-head`` lines in pull order to OUT and
  prints ``PULLED count=.. seconds=..``.

Must not: judge results (the tests do), or run in the test process.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from rocketmq.client import (  # type: ignore[import-untyped]  # no stubs
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    RecvMessage,
)
from rocketmq.ffi import _CConsumeStatus, _CLogLevel, dll  # type: ignore[import-untyped]

TAGS = ("TagA", "TagB", "TagC")
LOG_FILES = 2
LOG_FILE_BYTES = 8 * 1024 * 1024
#: A pause between two deliveries at least this long is counted as a stall. The
#: 0.4.4 client (C++ core 1.0.1) stops pulling a queue for 1 s once more than 1,000 of
#: its messages wait for the listener, so a listener slower than the pulls stalls.
STALL_S = 0.5

#: Native ids of the C++ threads whose Python thread state is kept (``_keep_thread_state``).
_KEPT_THREADS: set[int] = set()


def _keep_thread_state() -> None:
    """Keep this C++ callback thread's Python thread state from one call to the next.

    ctypes enters a callback from a thread Python did not start with
    ``PyGILState_Ensure``, which creates a thread state, and leaves it with
    ``PyGILState_Release``, which deletes it again: on 3.11 that maps and unmaps
    the state's 16 KiB frame stack, one ``munmap`` (and a TLB shootdown across
    the cores) per message. One extra ``Ensure``, never released, keeps the
    state for the thread's life. The C++ threads end in ``shutdown``, before
    the interpreter does.
    """
    tid = threading.get_native_id()
    if tid not in _KEPT_THREADS:
        _KEPT_THREADS.add(tid)
        ctypes.pythonapi.PyGILState_Ensure()


def message_fields(i: int, prefix: str, shards: int) -> tuple[str, str, int, int]:
    """Key, tag, shard and in-shard sequence of message ``i`` (the tests mirror this)."""
    return f"{prefix}{i:06d}", TAGS[i % 3], i % shards, i // shards


def _cap_logs(setter_files: Callable[..., Any], setter_level: Callable[..., Any], h: Any) -> None:
    setter_files(h, LOG_FILES, LOG_FILE_BYTES)
    setter_level(h, _CLogLevel.WARN)


def _text(value: bytes | str | None) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _message(args: argparse.Namespace, i: int) -> tuple[Any, str, int]:
    key, tag, shard, seq = message_fields(i, args.prefix, args.shards)
    msg = Message(args.topic)
    msg.set_keys(key)
    msg.set_tags(tag)
    head = f"{key}|{tag}|{shard}|{seq}|"
    msg.set_body(head + "x" * max(0, args.body_size - len(head)))
    return msg, key, shard


def _send(producer: Any, args: argparse.Namespace, start: int, results: TextIO | None) -> int:
    """Send message ``start`` (or the batch starting there); how many were sent.

    ``results`` gets ``key offset msgId`` per sync or orderly send (the client's
    SendResult, built from the broker's reply)."""
    if args.mode == "batch":
        count: int = min(args.batch_size, args.n - start)
        producer.send_batch([_message(args, i)[0] for i in range(start, start + count)])
        return count
    msg, key, shard = _message(args, start)
    if args.mode == "oneway":
        producer.send_oneway(msg)
        return 1
    result = producer.send_sync(msg) if args.mode == "sync" else producer.send_orderly(msg, shard)
    if int(result.status) != 0:
        raise RuntimeError(f"send status {result.status!r}")
    if results is not None:
        results.write(f"{key} {result.offset} {result.msg_id}\n")
    return 1


#: The stock C++ client (0.4.4) guards its table of broker connections with a try-lock
#: that gives up at once: a send made while its own heartbeat thread opens the first
#: connections to the brokers fails every attempt without reaching a broker, reported
#: as "No route info of this topic" (its log says "GetTransport of:<address> get
#: timed_mutex timeout"). Such a send, in the producer's first seconds, is tried again
#: a few times; later, or after the retries, it counts as an error as before.
_STARTUP_RACE_S = 5.0
_STARTUP_RETRIES = 5
_STARTUP_RETRY_WAIT_S = 0.02


def _startup_race(exc: Exception, started: float, retried: int) -> bool:
    return (
        "No route info of this topic" in str(exc)
        and time.monotonic() - started < _STARTUP_RACE_S
        and retried < _STARTUP_RETRIES
    )


def produce(args: argparse.Namespace) -> int:
    producer = Producer(f"PID_{args.topic}_{args.mode}", timeout=10_000)
    _sign(args, producer)
    _cap_logs(dll.SetProducerLogFileNumAndSize, dll.SetProducerLogLevel, producer._handle)
    producer.set_namesrv_addr(args.namesrv)
    producer.start()
    errors = 0
    epoch = time.time()
    started = time.monotonic()
    results = open(args.results, "w", encoding="utf-8") if args.results else None  # noqa: SIM115
    retried = 0
    try:
        i = 0
        while i < args.n:
            try:
                i += _send(producer, args, i, results)
            except Exception as exc:  # count and report; the caller sees errors=
                if _startup_race(exc, started, retried):
                    retried += 1
                    print(f"SEND_RETRY index={i} error={exc!r}", file=sys.stderr, flush=True)
                    threading.Event().wait(_STARTUP_RETRY_WAIT_S)  # its connect to finish
                    continue
                errors += 1
                print(f"SEND_ERROR index={i} error={exc!r}", file=sys.stderr, flush=True)
                i += 1 if args.mode != "batch" else args.batch_size
    finally:
        seconds = time.monotonic() - started
        producer.shutdown()
        if results is not None:
            results.close()
    print(
        f"PRODUCED mode={args.mode} count={args.n} errors={errors} seconds={seconds:.3f} "
        f"started={epoch:.3f}",
        flush=True,
    )
    return 0


class _Recorder:
    """Callback state of the push consumer: lines to a file, distinct keys seen."""

    def __init__(self, out: TextIO, expected: int, work_s: float = 0.0) -> None:
        self.out = out
        self.expected = expected
        self.work_s = work_s
        self.lock = threading.Lock()
        self.keys: set[str] = set()
        self.count = 0
        self.first = 0.0
        self.last = 0.0
        self.stalls = 0
        self.stalled_s = 0.0
        self.done = threading.Event()

    def __call__(self, msg: Any) -> None:
        _keep_thread_state()
        if self.work_s:
            # A slow listener (--work-ms), so a backlog exists when a test kills a broker.
            threading.Event().wait(self.work_s)
        line = f"{_text(msg.keys)} {_text(msg.tags)} {msg.queue_id} {msg.queue_offset}\n"
        with self.lock:
            now = time.monotonic()
            if not self.count:
                self.first = now
            elif now - self.last >= STALL_S:
                self.stalls += 1
                self.stalled_s += now - self.last
            self.last = now
            self.count += 1
            self.keys.add(_text(msg.keys))
            self.out.write(line)
            if len(self.keys) >= self.expected:
                self.done.set()


def _wait_done(done: threading.Event, args: argparse.Namespace) -> None:
    """Until EXPECTED keys arrived (then linger), the stop file exists, or the timeout.

    Not a test sleep: the consumer's own deadline; the linger lets a late
    duplicate or foreign message still be recorded.
    """
    deadline = time.monotonic() + args.timeout_s
    while time.monotonic() < deadline:
        if done.wait(0.05):
            threading.Event().wait(args.linger_s)
            return
        if args.stop_file and os.path.exists(args.stop_file):
            return


def _subscribe_with_retries(consumer: Any, args: argparse.Namespace, recorder: _Recorder) -> None:
    """Subscribe with a callback that answers RECONSUME_LATER for the first delivery of
    every ``--retry-every``-th key, and records ``key tag queue offset reconsumeTimes
    topic`` per delivery. The binding's own ``subscribe`` cannot do this: a callback
    that raises is reported to the C++ core as CONSUME_SUCCESS (ctypes swallows the
    exception and returns 0), so its retry flow would never run."""
    expected_retries = {i for i in range(args.expected) if i % args.retry_every == 0}

    def on_message(_consumer: Any, cmsg: Any) -> int:
        _keep_thread_state()
        msg = RecvMessage(cmsg)
        key, times = _text(msg.keys), int(msg.reconsume_times)
        with recorder.lock:
            recorder.out.write(
                f"{key} {_text(msg.tags)} {msg.queue_id} {msg.queue_offset} {times} "
                f"{_text(msg.topic)}\n"
            )
            recorder.count += 1
            recorder.keys.add(key)
            if times > 0:
                expected_retries.discard(int(key[-6:]))
            if len(recorder.keys) >= recorder.expected and not expected_retries:
                recorder.done.set()
        if times == 0 and int(key[-6:]) % args.retry_every == 0:
            return int(_CConsumeStatus.RECONSUME_LATER.value)
        return int(_CConsumeStatus.CONSUME_SUCCESS.value)

    # One message per callback: the C wrapper stops at the first RECONSUME_LATER and
    # sends the whole batch back, neighbours included.
    consumer.set_message_batch_max_size(1)
    dll.Subscribe(consumer._handle, args.topic.encode(), args.expression.encode())
    consumer._register_callback(on_message)


def push(args: argparse.Namespace) -> int:
    consumer = PushConsumer(args.group, orderly=args.orderly)
    _sign(args, consumer)
    _cap_logs(dll.SetPushConsumerLogFileNumAndSize, dll.SetPushConsumerLogLevel, consumer._handle)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.set_thread_count(args.threads)
    started = time.monotonic()
    # Line-buffered: a caller may watch the file grow while the consumer runs.
    with open(args.out, "w", encoding="utf-8", buffering=1) as out:
        recorder = _Recorder(out, args.expected, args.work_ms / 1000)
        if args.retry_every:
            _subscribe_with_retries(consumer, args, recorder)
        else:
            consumer.subscribe(args.topic, recorder, args.expression)
        consumer.start()
        print("PUSH_STARTED", flush=True)
        try:
            _wait_done(recorder.done, args)
        finally:
            consumer.shutdown()
            with recorder.lock:
                out.flush()
                count, distinct = recorder.count, len(recorder.keys)
                span = recorder.last - recorder.first
                stalls, stalled_s = recorder.stalls, recorder.stalled_s
    print(
        f"CONSUMED count={count} distinct={distinct} seconds={time.monotonic() - started:.3f} "
        f"span={span:.3f} stalls={stalls} stalled={stalled_s:.3f}",
        flush=True,
    )
    return 0


def pull(args: argparse.Namespace) -> int:
    consumer = PullConsumer(args.group)
    _sign(args, consumer)
    _cap_logs(dll.SetPullConsumerLogFileNumAndSize, dll.SetPullConsumerLogLevel, consumer._handle)
    consumer.set_namesrv_addr(args.namesrv)
    consumer.start()
    count = 0
    started = time.monotonic()
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            for msg in consumer.pull(args.topic, args.expression):
                body = _text(msg.body[:64])
                out.write(
                    f"{msg.queue_id} {msg.queue_offset} {_text(msg.keys)} {_text(msg.tags)} "
                    f"{msg.id} {body.rsplit('|', 1)[0]}\n"
                )
                count += 1
    finally:
        consumer.shutdown()
    print(f"PULLED count={count} seconds={time.monotonic() - started:.3f}", flush=True)
    return 0


def _sign(args: argparse.Namespace, client: Any) -> None:
    """ACL credentials (the C++ client signs every request with them)."""
    if args.access_key:
        client.set_session_credentials(args.access_key, args.secret_key, "ALIYUN")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    top.add_argument("--access-key", default="", help="ACL AccessKey (with --secret-key)")
    top.add_argument("--secret-key", default="", help="ACL SecretKey")
    roles = top.add_subparsers(dest="role", required=True)
    p = roles.add_parser("produce")
    p.add_argument("namesrv")
    p.add_argument("topic")
    p.add_argument("mode", choices=("sync", "oneway", "orderly", "batch"))
    p.add_argument("n", type=int)
    p.add_argument("--prefix", default="k")
    p.add_argument("--shards", type=int, default=16)
    p.add_argument("--body-size", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--results", default="", help="file for `key offset msgId` per sync send")
    c = roles.add_parser("push")
    for name in ("namesrv", "topic", "group", "expression"):
        c.add_argument(name)
    c.add_argument("expected", type=int)
    c.add_argument("timeout_s", type=float)
    c.add_argument("out")
    c.add_argument("--linger-s", type=float, default=1.0)
    c.add_argument("--threads", type=int, default=2)
    c.add_argument("--stop-file", default="", help="stop once this file exists")
    c.add_argument("--orderly", action="store_true", help="orderly consumer (locks queues)")
    c.add_argument("--work-ms", type=float, default=0.0, help="time each message takes")
    c.add_argument(
        "--retry-every",
        type=int,
        default=0,
        help="RECONSUME_LATER the first delivery of key i%%N==0",
    )
    u = roles.add_parser("pull")
    for name in ("namesrv", "topic", "group", "expression", "out"):
        u.add_argument(name)
    return top


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return {"produce": produce, "push": push, "pull": pull}[args.role](args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
