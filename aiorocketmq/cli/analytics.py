"""``mqanalytics``: offline reports over broker store files, with Spark.

Usage::

    mqanalytics report --store DIR [--store DIR ...] [--broker NAME ...]
                       [--master URL] [--out DIR] [--from T] [--to T] [--quiet]

``--store`` is a broker's ``storePathRootDir`` (repeat it for several brokers; the
broker name is the directory's name without ``-store`` unless ``--broker`` names
them in the same order). ``--master`` is a Spark master URL (default ``local[*]``);
``--from``/``--to`` bound the store time (ISO 8601, UTC when no zone is given, or
milliseconds since the epoch). Writes ``tables/*.parquet``, ``plots/*.png`` and
``report.html`` (plots inlined) under ``--out`` (default ``./mqanalytics-report``).
Spark's progress bar shows on stderr unless ``--quiet``.

Exit codes: 0 written; 1 failed (reason on stderr); 2 bad usage.

Owns: the command line, parsing times, creating (and then stopping) the Spark session
when none was running.

Must not: hold report logic (``aiorocketmq.analytics.report``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

__all__ = ["build_parser", "main", "parse_time_ms"]

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2


def parse_time_ms(text: str) -> int:
    """Milliseconds since the epoch from digits or an ISO 8601 time (UTC if naive)."""
    body = text.strip()
    if body.isdigit():
        return int(body)
    try:
        moment = datetime.fromisoformat(body)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a time (ISO 8601 or epoch ms): {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def build_parser() -> argparse.ArgumentParser:
    """The ``mqanalytics`` argument parser."""
    parser = argparse.ArgumentParser(prog="mqanalytics", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    report = commands.add_parser("report", help="messages, sizes, keys, producers, lag")
    report.add_argument("--store", action="append", required=True, help="a store root dir")
    report.add_argument("--broker", action="append", help="broker name per --store, in order")
    report.add_argument("--master", default="local[*]", help="Spark master URL")
    report.add_argument("--out", type=Path, default=Path("mqanalytics-report"))
    report.add_argument("--from", dest="from_ms", type=parse_time_ms, help="store time from")
    report.add_argument("--to", dest="to_ms", type=parse_time_ms, help="store time to (excl.)")
    report.add_argument("--top", type=int, default=20, help="rows of top-N tables")
    report.add_argument("--quiet", action="store_true", help="no Spark progress bar")
    return parser


def _run(args: argparse.Namespace) -> int:
    # Imported here: ``mqanalytics -h`` works without the analytics extra, and a plain
    # install gets a sentence naming the extra instead of a traceback.
    try:
        from pyspark import SparkContext

        from aiorocketmq.analytics.report import StoreRoot, build_tables, write_report
        from aiorocketmq.analytics.session import spark_session
    except ImportError as exc:
        print(
            f"mqanalytics: {exc.name or exc} is not installed; it comes with the analytics "
            "extra: pip install 'aiorocketmq[analytics]'",
            file=sys.stderr,
        )
        return EXIT_FAILED

    names = args.broker or [None] * len(args.store)
    if len(names) != len(args.store):
        print("mqanalytics: give one --broker per --store, or none", file=sys.stderr)
        return EXIT_USAGE
    missing = [s for s in args.store if not (Path(s) / "commitlog").is_dir()]
    if missing:
        print(f"mqanalytics: no commitlog directory in {', '.join(missing)}", file=sys.stderr)
        return EXIT_FAILED
    stores = [StoreRoot.of(s, b) for s, b in zip(args.store, names, strict=True)]
    # A session made by the caller (any thread) is kept: only ours is stopped.
    owned = SparkContext._active_spark_context is None
    spark = spark_session(args.master, progress=not args.quiet)
    try:
        tables = build_tables(spark, stores, from_ms=args.from_ms, to_ms=args.to_ms, top=args.top)
        result = write_report(tables, args.out)
    finally:
        if owned:
            spark.stop()
    print(f"mqanalytics: wrote {result.html} ({len(result.plots)} plots, "
          f"{len(result.parquet)} tables)")  # fmt: skip
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mqanalytics``; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except (OSError, ValueError) as exc:
        print(f"mqanalytics: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
