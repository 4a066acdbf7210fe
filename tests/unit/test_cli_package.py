"""The command-line tools' package: what importing it sets for the process."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = "import aiorocketmq.cli, os, numpy\nprint(os.environ['OPENBLAS_NUM_THREADS'])\n"


def _run(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_tools_cap_openblas_at_one_thread() -> None:
    assert _run(None) == "1"


@pytest.mark.parametrize("chosen", ["4", "0"])
def test_an_operators_choice_stands(chosen: str) -> None:
    assert _run(chosen) == chosen
