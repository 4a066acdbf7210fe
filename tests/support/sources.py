"""The project's sources as a wheel is built from them, copied out of the checkout.

Owns: ``copy_sources``, used by the wheel test and the compose test's wheelhouse.
setuptools builds in the source tree's ``build/``, so two builds of the checkout at
once (two xdist workers) would share it; and a copy leaves out the checkout's
in-place compiled kernels, so the wheel compiles its own.

Must not: build anything (the callers run pip).
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["DIST_FILES", "copy_sources"]

REPO = Path(__file__).resolve().parents[2]

#: What a wheel is built from beside the package itself (pyproject's inputs).
DIST_FILES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "NOTICE", "CHANGELOG.md")


def copy_sources(dest: Path) -> Path:
    """Copy the package and ``DIST_FILES`` into ``dest`` (created, or replaced); ``dest``."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(
        REPO / "aiorocketmq", dest / "aiorocketmq",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "_*_kernels.c"),
    )  # fmt: skip
    for name in DIST_FILES:
        shutil.copy2(REPO / name, dest / name)
    return dest
