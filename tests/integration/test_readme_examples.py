"""The README's Python client examples run as written against a real cluster.

Each ```python block of the "The Python client" section runs in its own process
(`python -c`), with the name-server address swapped for the test's; every example
must exit 0. The producer example runs first, so the consumers find messages.
"""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.cluster import start_broker, start_namesrv
from tests.support.procs import ManagedProcess

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_NAMESRV = "127.0.0.1:9876"


def client_examples() -> list[str]:
    """The python blocks of the README's client section, in order."""
    text = (REPO_ROOT / "README.md").read_text("utf-8")
    section = text.split("## The Python client", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_section_has_the_six_examples() -> None:
    examples = client_examples()
    assert len(examples) == 6
    assert all(EXAMPLE_NAMESRV in example for example in examples)


async def test_readme_client_examples_run(start_process: StartProcess, tmp_path: Path) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    for i, example in enumerate(client_examples()):
        code = example.replace(EXAMPLE_NAMESRV, namesrv)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=tmp_path,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, f"example {i} failed:\n{err.decode()[-3000:]}"
        assert out.strip(), f"example {i} printed nothing"
