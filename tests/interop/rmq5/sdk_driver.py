"""Drives the official RocketMQ 5 Python SDK (PyPI ``rocketmq-python-client``) for
the interop tests. Runs under the SDK's own venv (``.venv-rmq5``, made by
``tests/interop/rmq5/sdk_venv.py``): its top-level ``rocketmq`` package is not the
stock C++ client's of the same name in the project's venv.

Each subcommand prints one JSON document on stdout as its last line and exits 0,
or exits 1 with the error on stderr::

    produce  --endpoint E --topic T --count N
             [--kind normal|fifo|delay|transaction|transaction-mixed]
             [--tag TAG] [--group MESSAGE_GROUP] [--delay-s S] [--prefix P]
             [--keep-going]  (a failed send is recorded as {"error": text}, not fatal)
    simple   --endpoint E --topic T --group G --expect N [--invisible S]
             [--mode ack|redeliver|hold] [--timeout S]
    push     --endpoint E --topic T --group G --expect N [--timeout S] [--fail-first]

Every subcommand takes ``--ak AK --sk SK``: the SDK's credentials (it signs every
call), for a broker with ACL on.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)

_CREDENTIALS = Credentials()


def _config(endpoint: str) -> ClientConfiguration:
    return ClientConfiguration(endpoint, _CREDENTIALS)


def _view(message: Any) -> dict[str, Any]:
    return {
        "id": message.message_id,
        "body": message.body.decode(),
        "topic": message.topic,
        "tag": message.tag,
        "keys": list(message.keys or []),
        "group": message.message_group,
        "attempt": message.delivery_attempt,
        "properties": dict(message.properties or {}),
        "delivery_timestamp": message.delivery_timestamp,
    }


class _Commit(TransactionChecker):
    """Commits whatever the broker checks; ``done`` once ``want`` distinct ids were."""

    def __init__(self, want: int) -> None:
        self.checked: list[str] = []
        self.want = want
        self.done = threading.Event()

    def check(self, message: Message) -> TransactionResolution:
        self.checked.append(message.message_id)
        if len(set(self.checked)) >= self.want:
            self.done.set()
        return TransactionResolution.COMMIT


def produce(args: argparse.Namespace) -> dict[str, Any]:
    checker = _Commit((args.count + 1) // 2) if args.kind.startswith("transaction") else None
    producer = Producer(_config(args.endpoint), (args.topic,), checker)
    producer.startup()
    sent = []
    try:
        for i in range(args.count):
            message = Message()
            message.topic = args.topic
            message.body = f"{args.prefix}{i}".encode()
            message.tag = args.tag
            message.keys = f"key-{args.prefix}{i}"
            message.add_property("index", str(i))
            if args.kind == "fifo":
                message.message_group = args.group
            if args.kind == "delay":
                message.delivery_timestamp = int(time.time()) + args.delay_s
            if args.kind.startswith("transaction"):
                transaction = producer.begin_transaction()
                receipt = producer.send(message, transaction)
                if args.kind == "transaction":
                    transaction.commit()
                elif i % 2:  # transaction-mixed: odd ones rolled back, even ones left open
                    transaction.rollback()
            else:
                try:
                    receipt = producer.send(message)
                except Exception as exc:  # --keep-going: the caller judges the text
                    if not args.keep_going:
                        raise
                    sent.append({"error": f"{type(exc).__name__}: {exc}"})
                    continue
            sent.append({"id": receipt.message_id, "sent_at": time.time()})
        # transaction-mixed: the open ones are committed by the checker when the broker
        # checks; stay until it did.
        if args.kind == "transaction-mixed" and checker is not None:
            checker.done.wait(args.timeout)
    finally:
        producer.shutdown()
    return {"sent": sent, "checked": checker.checked if checker is not None else []}


def simple(args: argparse.Namespace) -> dict[str, Any]:
    consumer = SimpleConsumer(
        _config(args.endpoint), args.group, {args.topic: FilterExpression()}, await_duration=5
    )
    consumer.startup()
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + args.timeout
    try:
        while len(received) < args.expect and time.monotonic() < deadline:
            for message in consumer.receive(32, args.invisible) or []:
                view = _view(message)
                view["received_at"] = time.time()
                received.append(view)
                if args.mode == "ack" or (
                    args.mode == "redeliver" and message.delivery_attempt > 1
                ):
                    consumer.ack(message)
                elif args.mode == "redeliver":
                    consumer.change_invisible_duration(message, 1)
        # Whatever else arrives before a short wait is a duplicate the test must see.
        if args.mode == "ack":
            for message in consumer.receive(32, args.invisible) or []:
                received.append(_view(message))
                consumer.ack(message)
    finally:
        consumer.shutdown()
    return {"received": received}


class _Collect(MessageListener):
    """Records every delivery; ``done`` once ``expect`` messages were consumed (with
    ``fail_first``: each failed once, then consumed)."""

    def __init__(self, fail_first: bool, expect: int) -> None:
        self.seen: list[dict[str, Any]] = []
        self.fail_first = fail_first
        self.expect = expect
        self.done = threading.Event()
        self._lock = threading.Lock()

    def consume(self, message: Any) -> ConsumeResult:
        with self._lock:  # listeners run on the SDK's consumption threads
            self.seen.append(_view(message))
            ok = {m["id"] for m in self.seen if not self.fail_first or m["attempt"] > 1}
            if len(ok) >= self.expect:
                self.done.set()
        if self.fail_first and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def push(args: argparse.Namespace) -> dict[str, Any]:
    listener = _Collect(args.fail_first, args.expect)
    consumer = PushConsumer(
        _config(args.endpoint), args.group, listener, {args.topic: FilterExpression()}
    )
    consumer.startup()
    try:
        listener.done.wait(args.timeout)
    finally:
        consumer.shutdown()
    return {"received": listener.seen}


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("produce", "simple", "push"):
        p = sub.add_parser(name)
        p.add_argument("--endpoint", required=True)
        p.add_argument("--topic", required=True)
        p.add_argument("--timeout", type=float, default=60)
        p.add_argument("--ak", default="")
        p.add_argument("--sk", default="")
    p = sub.choices["produce"]
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--kind", default="normal")
    p.add_argument("--tag", default="TagA")
    p.add_argument("--group", default="order-1")
    p.add_argument("--delay-s", type=int, default=3)
    p.add_argument("--prefix", default="m")
    p.add_argument("--keep-going", action="store_true")
    for name in ("simple", "push"):
        sub.choices[name].add_argument("--group", required=True)
        sub.choices[name].add_argument("--expect", type=int, required=True)
    sub.choices["simple"].add_argument("--invisible", type=int, default=30)
    sub.choices["simple"].add_argument("--mode", default="ack")
    sub.choices["push"].add_argument("--fail-first", action="store_true")
    args = parser.parse_args()
    global _CREDENTIALS
    _CREDENTIALS = Credentials(args.ak, args.sk)
    result = {"produce": produce, "simple": simple, "push": push}[args.command](args)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
