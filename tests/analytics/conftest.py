"""Spark tests share ONE SparkSession and two broker stores written once per session."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.analytics.store_writer import StoreTruth, write_store

pytest.importorskip("pyspark", reason="the analytics extra is not installed")

from pyspark.sql import SparkSession

from aiorocketmq.analytics.session import spark_session


@dataclass
class Stores:
    """broker-a (3 topics, a retry) and broker-b (2 topics), both stopped."""

    a: StoreTruth
    b: StoreTruth


@pytest.fixture(scope="session", autouse=True)
def _spark_starting() -> Iterator[concurrent.futures.Future[SparkSession]]:
    """Start the JVM in a thread at once: it boots (~20 s) while the brokers write."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spark-start")
    future = pool.submit(
        spark_session, "local[2]", app_name="aiorocketmq-tests",
        conf={"spark.sql.shuffle.partitions": "2"},
    )  # fmt: skip
    yield future
    pool.shutdown(wait=True)
    if future.exception() is None:
        future.result().stop()
    # py4j logs "Closing down clientserver connection" (INFO) from __del__ at
    # interpreter exit, after pytest closed the streams: a "--- Logging error ---".
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.fixture(scope="session")
def spark(_spark_starting: concurrent.futures.Future[SparkSession]) -> SparkSession:
    """The one session of the test run."""
    return _spark_starting.result(timeout=110)


@pytest.fixture(scope="session")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    """Both stores, written by real brokers (no loop runs in a sync session fixture)."""
    directory = tmp_path_factory.mktemp("brokers")

    async def both() -> Stores:
        a = await write_store(directory, "broker-a", ("OrderTopic", "PayTopic", "LogTopic"),
                              90, retry=True)  # fmt: skip
        b = await write_store(directory, "broker-b", ("PayTopic", "AuditTopic"), 24, retry=False)
        return Stores(a, b)

    return asyncio.run(both())
