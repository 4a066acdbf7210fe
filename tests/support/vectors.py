"""The golden vectors in ``tests/vectors``, and reading them.

The captured client frames and stored records are part of the repository (see
``tests/vectors/README.md``), so a plain clone has everything its tests read. Test
modules that parametrize over vectors at collection time call ``load_jsonl``; fixtures
use ``locate_vectors_dir``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
VECTORS_DIR = REPO_ROOT / "tests" / "vectors"
#: The files the suite reads; each must exist and hold at least one record.
VECTOR_FILES = ("cpp_client.jsonl", "alions_client.jsonl", "stored_messages.jsonl")


def locate_vectors_dir(directory: Path = VECTORS_DIR) -> Path:
    """``directory`` (``tests/vectors``) once every file in ``VECTOR_FILES`` is there.

    Raises:
        LookupError: Naming the missing directory or files (a broken checkout, e.g.
            Git LFS or a sparse clone that left them out).
    """
    if not directory.is_dir():
        raise LookupError(f"vectors directory not found: {directory} (is the checkout complete?)")
    missing = [name for name in VECTOR_FILES if not (directory / name).is_file()]
    if missing:
        raise LookupError(f"missing vectors in {directory}: {', '.join(missing)}")
    return directory


def load_jsonl(name: str) -> list[dict[str, Any]]:
    """Every line of one vectors file, parsed."""
    with (locate_vectors_dir() / name).open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
