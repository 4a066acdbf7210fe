"""The official RocketMQ 5 Python SDK's own venv (``.venv-rmq5`` at the repository
root), made from PyPI with the pinned ``requirements.txt`` beside this file.

A separate venv because the SDK's top-level package is ``rocketmq``, the name of the
stock 4.x C++ client the project's dev extra installs; and because the test must
prove the published package works, not a copy of it.

``make interop-deps`` calls ``python tests/interop/rmq5/sdk_venv.py``; the interop
tests call ``ensure_sdk_python()``, which does the same when the venv is missing or
older than the requirements, and ``run_sdk`` to run one ``sdk_driver.py`` subcommand
in it.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VENV = REPO / ".venv-rmq5"
REQUIREMENTS = HERE / "requirements.txt"
STAMP = VENV / ".installed"
DRIVER = HERE / "sdk_driver.py"
_INSTALL_TIMEOUT_S = 900
_SDK_TIMEOUT_S = 120


def ensure_sdk_python() -> Path:
    """The SDK venv's interpreter, installing it first when needed.

    Raises:
        subprocess.CalledProcessError: venv creation or pip failed (the test fails
            with pip's output: an SDK that cannot be installed is a real failure).
    """
    python = VENV / "bin" / "python"
    if STAMP.exists() and STAMP.stat().st_mtime >= REQUIREMENTS.stat().st_mtime:
        return python
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=120)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS)],
        check=True,
        timeout=_INSTALL_TIMEOUT_S,
    )
    STAMP.touch()
    return python


async def run_sdk(python: Path, home: Path, *args: str) -> dict[str, Any]:
    """Run one driver subcommand (``produce``, ``simple``, ``push``) with the SDK's
    interpreter ``python``, its logs under ``home``; its JSON result.

    Raises:
        AssertionError: The driver failed (its stderr's tail in the message).
        TimeoutError: It did not finish within two minutes (it is killed).
    """
    proc = await asyncio.create_subprocess_exec(
        str(python),
        str(DRIVER),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(home)},  # the SDK logs under ~/logs
    )
    try:
        async with asyncio.timeout(_SDK_TIMEOUT_S):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, f"sdk {args[0]} failed:\n{err.decode()[-3000:]}"
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


if __name__ == "__main__":
    print(ensure_sdk_python())
