"""A SparkSession ready for the ``rocketmq`` data source.

Owns: ``spark_session`` (sets ``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` to the
running interpreter, so executors import this project and pyarrow; local[*] unless a
master URL is given; Arrow on; the data source registered).

Must not: stop a session it did not create, or change Spark settings the caller gave.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from aiorocketmq.analytics.datasource import register

__all__ = ["DEFAULT_MASTER", "spark_session"]

DEFAULT_MASTER = "local[*]"


def spark_session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "aiorocketmq-analytics",
    progress: bool = False,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Get or create a session with the data source registered.

    Args:
        master: Spark master URL (``local[*]``, ``spark://host:7077``, ...).
        app_name: the application name shown in Spark's UI.
        progress: show Spark's console progress bar (stderr).
        conf: extra Spark settings.
    """
    # Executors must run this interpreter: the system Python lacks our packages.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
