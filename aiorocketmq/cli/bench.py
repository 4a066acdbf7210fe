"""``mqbench``: RocketMQ's benchmark producer and consumer, on the aiorocketmq client.

Usage::

    mqbench producer [-n NAMESRV] [-t BenchmarkTest] [-w 64] [-s 128] [-k true] [-l 0]
                     [-p 0] [-q 0] [-d false -e 1] [-b 1] [--seconds S]
                     [--report-interval 10] [--json]
    mqbench consumer [-n NAMESRV] [-t BenchmarkTest] [-w 20] [-g benchmark_consumer]
                     [-p false] [-e '*'] [-r 0.0] [-q 0] [--seconds S]
                     [--report-interval 10] [--json]

Flags are those of RocketMQ 4.9.8's ``benchmark/Producer.java`` and ``Consumer.java``
(boolean flags take ``true``/``false`` as there; ``-w`` counts asyncio tasks rather than
threads). Ours: ``-b`` batch size, ``-q`` on the consumer (stop after that many
messages), ``--seconds``, ``--report-interval`` (Java: 10 s), ``--json`` (JSON lines).
The report lines are Java's, with p50/p99 appended; a progress line goes to stderr
when it is a terminal. Without ``-n``, ``NAMESRV_ADDR`` is used.

Exit codes: 0 done (interrupted runs print their summary and exit 0), 1 the client
failed, 2 bad usage.

Owns: the command line only; the load and the lines live in ``aiorocketmq.bench``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from aiorocketmq.bench.loops import BenchOptions, run_consumer, run_producer
from aiorocketmq.client import MQClientError
from aiorocketmq.runtime import run

__all__ = ["build_parser", "main"]


def _java_bool(text: str) -> bool:
    """``Boolean.parseBoolean``: true only for 'true', any case."""
    return text.strip().lower() == "true"


def _common(p: argparse.ArgumentParser, threads: int) -> None:
    p.add_argument("-n", "--namesrvAddr", help="name servers (default: $NAMESRV_ADDR)")
    p.add_argument("-t", "--topic", default="BenchmarkTest", help="Topic name")
    p.add_argument("-w", "--threadCount", type=int, default=threads, help="concurrent tasks")
    p.add_argument("--seconds", type=float, default=0.0, help="stop after this long (ours)")
    p.add_argument("--report-interval", type=float, default=10.0, help="seconds between lines")
    p.add_argument("--json", action="store_true", help="JSON lines instead of text (ours)")


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``mqbench``."""
    parser = argparse.ArgumentParser(prog="mqbench", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="tool", metavar="producer|consumer", required=True)
    p = sub.add_parser("producer", help="send as fast as the tasks can")
    _common(p, 64)
    p.add_argument("-s", "--messageSize", type=int, default=128, help="Message Size")
    p.add_argument("-k", "--keyEnable", type=_java_bool, default=False, help="Message Key Enable")
    p.add_argument("-l", "--tagCount", type=int, default=0, help="Tag count")
    p.add_argument("-p", "--propertySize", type=int, default=0, help="Property Size")
    p.add_argument("-q", "--messageQuantity", type=int, default=0, help="0: forever")
    p.add_argument("-d", "--delayEnable", type=_java_bool, default=False, help="Delay Enable")
    p.add_argument("-e", "--delayLevel", type=int, default=1, help="Delay level")
    p.add_argument("-b", "--batchSize", type=int, default=1, help="messages per batch (ours)")
    c = sub.add_parser("consumer", help="consume and time born/store-to-consumer")
    _common(c, 20)
    c.add_argument("-g", "--group", default="benchmark_consumer", help="Consumer group name")
    c.add_argument("-p", "--groupSuffix", type=_java_bool, default=False, help="group suffix")
    c.add_argument("-e", "--expression", default="*", help="tag expression")
    c.add_argument("-r", "--failRate", type=float, default=0.0, help="consumer fail rate")
    c.add_argument("-q", "--messageQuantity", type=int, default=0, help="stop after N (ours)")
    return parser


def options_of(args: argparse.Namespace) -> BenchOptions:
    """The parsed command line as ``BenchOptions`` (``-n`` else ``NAMESRV_ADDR``)."""
    opts = BenchOptions(
        namesrv=args.namesrvAddr or os.environ.get("NAMESRV_ADDR") or None,
        topic=args.topic, threads=args.threadCount, seconds=args.seconds,
        report_interval=args.report_interval, json=args.json,
        quantity=args.messageQuantity,
    )  # fmt: skip
    if args.tool == "producer":
        opts.size, opts.key_enable, opts.tag_count = args.messageSize, args.keyEnable, args.tagCount
        opts.property_size, opts.delay_enable = args.propertySize, args.delayEnable
        opts.delay_level, opts.batch = args.delayLevel, args.batchSize
    else:
        opts.group, opts.group_suffix = args.group, args.groupSuffix
        opts.expression, opts.fail_rate = args.expression, args.failRate
    return opts


def _validate(parser: argparse.ArgumentParser, opts: BenchOptions) -> None:
    if opts.threads < 1 or opts.batch < 1 or opts.size < 0 or opts.report_interval <= 0:
        parser.error("-w and -b must be >= 1, -s >= 0, --report-interval > 0")
    if not 0.0 <= opts.fail_rate <= 1.0:
        parser.error("-r must be between 0 and 1")


def _header(tool: str, o: BenchOptions) -> str:
    """Java's first line, naming the settings in force."""
    if tool == "producer":
        return (
            f"topic: {o.topic} threadCount: {o.threads} messageSize: {o.size} "
            f"keyEnable: {str(o.key_enable).lower()} propertySize: {o.property_size} "
            f"tagCount: {o.tag_count} messageQuantity: {o.quantity} batchSize: {o.batch}\n"
            f"delayEnable: {str(o.delay_enable).lower()} delayLevel: {o.delay_level}\n"
        )
    return (
        f"topic: {o.topic}, threadCount {o.threads}, group: {o.group}, "
        f"suffix: {str(o.group_suffix).lower()}, expression: {o.expression}, "
        f"failRate: {o.fail_rate}\n"
    )


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _progress(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mqbench``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    opts = options_of(args)
    _validate(parser, opts)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    progress = _progress if sys.stderr.isatty() else None
    if not opts.json:
        _write(_header(args.tool, opts))

    async def go(stop: asyncio.Event) -> int:
        try:
            if args.tool == "producer":
                await run_producer(opts, _write, stop, progress)
            else:
                await run_consumer(opts, _write, stop, progress)
        except MQClientError as exc:
            print(f"mqbench {args.tool}: {exc}", file=sys.stderr)
            return 1
        return 0

    return run(go)


if __name__ == "__main__":
    sys.exit(main())
