"""A client application for the compose tests, run on the host or in a container.

``python network_client.py NAMESRV TOPIC GROUP --produce N --prefix P [--expect K]...``

Sends N messages with our Producer (key ``P%06d``, a tag, a 1 KiB body; 16 sends in
flight), then consumes the topic with a PushConsumer from the first offset until every
key it sent and every ``--expect PREFIX:COUNT`` key (``PREFIX%06d``: what the stock C++
client sent) and ``--expect-plain PREFIX:COUNT`` key (``PREFIX%d``: what the RocketMQ 5
SDK driver sent) was delivered, or ``--timeout`` passes. Prints one JSON line:
``{"sent": .., "send_errors": .., "consumed": .., "missing": [first few], "seconds": ..}``
and exits 0 either way: the test judges it.

Must not: import anything but aiorocketmq and the standard library (the container has
only the image's venv), or print anything else on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from aiorocketmq.client import (
    ConsumeConcurrentlyStatus,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    PushConsumerConfig,
)

IN_FLIGHT = 16
TAGS = ("TagA", "TagB", "TagC")


async def produce(namesrv: str, topic: str, n: int, prefix: str) -> int:
    """Send ``n`` keyed messages; the number of failed sends."""
    errors = 0
    body = b"x" * 1024
    async with Producer(f"PG_{prefix}", namesrv_addr=namesrv) as producer:

        async def loop(start: int) -> None:
            nonlocal errors
            for i in range(start, n, IN_FLIGHT):
                msg = Message(topic, body, tags=TAGS[i % 3], keys=f"{prefix}{i:06d}")
                try:
                    await producer.send(msg)
                except Exception as exc:  # counted; the test fails on any
                    errors += 1
                    print(f"send {i} failed: {exc!r}", file=sys.stderr)

        await asyncio.gather(*(loop(k) for k in range(IN_FLIGHT)))
    return errors


async def consume(
    namesrv: str, topic: str, group: str, expected: set[str], timeout_s: float
) -> set[str]:
    """Deliver until every expected key came or the time is up; the keys seen."""
    seen: set[str] = set()
    done = asyncio.Event()
    config = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer = PushConsumer(group, namesrv_addr=namesrv, config=config)
    consumer.subscribe(topic, "*")

    def on_messages(msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            if len(msg.body) == 0:
                raise ValueError(f"empty body at {msg.msg_id}")
            seen.update(msg.keys)
        if expected <= seen:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(on_messages)
    await consumer.start()
    try:
        await asyncio.wait_for(done.wait(), timeout_s)
    except TimeoutError:
        pass
    finally:
        await consumer.shutdown()
    return seen


async def main(args: argparse.Namespace) -> dict[str, object]:
    started = time.monotonic()
    errors = await produce(args.namesrv, args.topic, args.produce, args.prefix)
    expected = {f"{args.prefix}{i:06d}" for i in range(args.produce)}
    for item in args.expect:
        prefix, _, count = item.rpartition(":")
        expected |= {f"{prefix}{i:06d}" for i in range(int(count))}
    for item in args.expect_plain:
        prefix, _, count = item.rpartition(":")
        expected |= {f"{prefix}{i}" for i in range(int(count))}
    seen = await consume(args.namesrv, args.topic, args.group, expected, args.timeout)
    missing = sorted(expected - seen)
    return {
        "sent": args.produce,
        "send_errors": errors,
        "expected": len(expected),
        "consumed": len(expected & seen),
        "missing": missing[:10],
        "seconds": round(time.monotonic() - started, 3),
    }


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("namesrv")
    p.add_argument("topic")
    p.add_argument("group")
    p.add_argument("--produce", type=int, default=0)
    p.add_argument("--prefix", default="py")
    p.add_argument("--expect", action="append", default=[], help="PREFIX:COUNT (PREFIX%%06d)")
    p.add_argument("--expect-plain", action="append", default=[], help="PREFIX:COUNT (PREFIX%%d)")
    p.add_argument("--timeout", type=float, default=90.0)
    return p.parse_args(argv)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(parse(sys.argv[1:])))), flush=True)
