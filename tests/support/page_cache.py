"""Taking a store's files out of memory, for tests and benchmarks of reads from disk."""

from __future__ import annotations

import os
from pathlib import Path


def drop_from_page_cache(root: Path) -> int:
    """Drop every file under ``root`` from the page cache; how many files there were.

    Only pages that are clean and mapped by no process go: stop the store (or close
    the files) and flush first.
    """
    count = 0
    for path in root.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            count += 1
    return count
