"""The official RocketMQ 5 Python SDK's own venv (``.venv-rmq5`` at the repository
root), made from PyPI with the pinned ``requirements.txt`` beside this file.

A separate venv because the SDK's top-level package is ``rocketmq``, the name of the
stock 4.x C++ client the project's dev extra installs; and because the test must
prove the published package works, not a copy of it.

``make interop-deps`` calls ``python tests/interop/rmq5/sdk_venv.py``; the interop
tests call ``ensure_sdk_python()``, which does the same when the venv is missing or
older than the requirements.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
VENV = REPO / ".venv-rmq5"
REQUIREMENTS = HERE / "requirements.txt"
STAMP = VENV / ".installed"
DRIVER = HERE / "sdk_driver.py"
_INSTALL_TIMEOUT_S = 900


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


if __name__ == "__main__":
    print(ensure_sdk_python())
