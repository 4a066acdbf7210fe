"""Where the shared golden vectors live, and reading them.

The repository is a clone with ``shared/`` beside it (``<repo>/../shared``), or
``$AIOROCKETMQ_SHARED`` names the shared directory. Test modules that parametrize
over vectors at collection time call ``load_jsonl``; fixtures use ``locate_vectors_dir``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SHARED_ENV = "AIOROCKETMQ_SHARED"
REPO_ROOT = Path(__file__).resolve().parents[2]


def locate_vectors_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``<shared>/vectors``, where shared is ``$AIOROCKETMQ_SHARED`` or ``<repo>/../shared``.

    Raises:
        LookupError: With a message saying where it looked and how to fix it.
    """
    environ = os.environ if environ is None else environ
    override = environ.get(SHARED_ENV)
    shared = Path(override).expanduser() if override else REPO_ROOT.parent / "shared"
    how = f"{SHARED_ENV}={override!r}" if override else f"<repo>/../shared = {shared}"
    if not shared.is_dir():
        raise LookupError(
            f"shared directory not found ({how}): put the shared checkout beside the "
            f"repo clone, or set {SHARED_ENV} to its path"
        )
    vectors = shared / "vectors"
    if not vectors.is_dir():
        raise LookupError(f"no vectors/ in the shared directory ({how}): expected {vectors}")
    return vectors


def load_jsonl(name: str) -> list[dict[str, Any]]:
    """Every line of one vectors file, parsed."""
    with (locate_vectors_dir() / name).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
