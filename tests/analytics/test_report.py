"""``mqanalytics report`` end to end on two brokers' stores."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from aiorocketmq.cli.analytics import main, parse_time_ms
from tests.analytics.conftest import Stores
from tests.analytics.store_writer import GROUP, RETRY_TOPIC, StoreTruth

pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def _expected_lag(truth: StoreTruth) -> dict[tuple[str, int], int]:
    ends = Counter((s.topic, s.queue_id) for s in truth.sent)
    return {key: max(ends[key] - offset, 0) for key, offset in truth.committed.items()}


def test_report_writes_tables_plots_and_one_html_page(
    spark: SparkSession, stores: Stores, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report"
    code = main(["report", "--store", str(stores.a.root), "--store", str(stores.b.root),
                 "--out", str(out), "--quiet"])  # fmt: skip
    assert code == 0
    assert "report.html" in capsys.readouterr().out
    assert not spark.sparkContext._jsc.sc().isStopped()  # the shared session is not stopped
    html = (out / "report.html").read_text("utf-8")
    plots = sorted(p.name for p in (out / "plots").glob("*.png"))
    charts = ["throughput", "sizes", "top_keys", "top_tags", "producers", "retry_share", "lag",
              "lag_history"]  # fmt: skip
    assert plots == sorted(f"{c}.png" for c in charts)
    for name in plots:
        png = (out / "plots" / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert html.count("data:image/png;base64,") == len(plots)
    topics = pd.read_parquet(out / "tables" / "topics.parquet")
    got = {(r.broker, r.topic): r.messages for r in topics.itertuples()}
    assert got[("broker-a", "OrderTopic")] == 30 and got[("broker-b", "AuditTopic")] == 12
    assert got[("broker-a", RETRY_TOPIC)] == 1
    share = pd.read_parquet(out / "tables" / "retry_share.parquet").set_index("kind")["count"]
    assert share["retry"] == 1 and share["normal"] == 90 + 24
    lag = pd.read_parquet(out / "tables" / "lag.parquet")
    assert set(lag["group"]) == {GROUP}
    for truth in (stores.a, stores.b):
        got_lag = lag[lag["broker"] == truth.broker].set_index(["topic", "queueId"])["lag"]
        assert got_lag.to_dict() == _expected_lag(truth)
    history = pd.read_parquet(out / "tables" / "lag_history.parquet")
    history = history[history["broker"] == "broker-a"]
    assert history["timestamp"].nunique() == 3
    by_time = history.groupby("timestamp")["lag"].sum()
    # The first snapshot (offsets 0) came after the first send; the last after all.
    assert by_time.iloc[0] == 1 and by_time.iloc[-1] == sum(_expected_lag(stores.a).values())
    scan = pd.read_parquet(out / "tables" / "scan.parquet")
    assert scan["skippedBytes"].sum() == 0 and scan["records"].sum() == 92 + 24
    keys = pd.read_parquet(out / "tables" / "top_keys.parquet")
    assert keys["key"].iloc[0].startswith("batch-") and len(keys) == 20


def test_time_window_and_bad_usage(
    spark: SparkSession, stores: Stores, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse_time_ms("2023-11-14T22:13:20") == 1_700_000_000_000
    assert parse_time_ms("1700000000000") == 1_700_000_000_000
    late = max(s.after_ms for s in stores.a.sent) + 60_000
    out = tmp_path / "empty"
    assert main(["report", "--store", str(stores.a.root), "--out", str(out), "--quiet",
                 "--from", str(late)]) == 0  # fmt: skip
    topics = pd.read_parquet(out / "tables" / "topics.parquet")
    assert topics.empty
    assert main(["report", "--store", str(tmp_path / "nowhere"), "--out", str(out)]) == 1
    assert "no commitlog directory" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["report", "--store", str(stores.a.root), "--from", "yesterday"])
    assert exc.value.code == 2
