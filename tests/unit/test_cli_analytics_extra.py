"""``mqanalytics`` without the analytics extra: a sentence naming the extra, exit 1."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from aiorocketmq.cli.analytics import EXIT_FAILED, main


def test_missing_pyspark_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # None in sys.modules makes ``import pyspark`` raise ImportError, as when absent.
    monkeypatch.setitem(sys.modules, "pyspark", None)
    assert main(["report", "--store", str(tmp_path)]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err == (
        "mqanalytics: pyspark is not installed; it comes with the analytics extra: "
        "pip install 'aiorocketmq[analytics]'\n"
    )
