"""Preallocation without ``os.posix_fallocate`` (macOS has none): zeros are written.

The fallback must reserve the same blocks as ``posix_fallocate`` (a full disk fails
at creation, not as SIGBUS later) and leave a zero-filled file of the exact size.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from aiorocketmq.store.mapped_file import MappedFile, offset_to_file_name, reserve_blocks

# Larger than the fallback's 4 MiB chunk and not a multiple of it: the loop's tail runs.
SIZE = 4 * 1024 * 1024 + 3 * 4096 + 17


@pytest.fixture
def no_fallocate(monkeypatch: pytest.MonkeyPatch) -> None:
    """``os`` as on macOS: the attribute is absent, not merely failing."""
    monkeypatch.delattr(os, "posix_fallocate", raising=False)
    assert not hasattr(os, "posix_fallocate")


@pytest.mark.usefixtures("no_fallocate")
def test_create_preallocates_by_writing_zeros(tmp_path: Path) -> None:
    mapped = MappedFile.create_blocking(tmp_path / offset_to_file_name(0), SIZE, preallocate=True)
    try:
        stat = os.stat(mapped.path)
        assert stat.st_size == SIZE
        assert stat.st_blocks * 512 >= SIZE  # real blocks, not a sparse file
        assert mapped.path.read_bytes() == bytes(SIZE)
        assert mapped.append(b"after") == 0  # the mapping works as with fallocate
    finally:
        mapped.shutdown()


@pytest.mark.usefixtures("no_fallocate")
def test_fallback_keeps_existing_length_and_reports_errors(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.ftruncate(fd, SIZE)
        reserve_blocks(fd, SIZE)
        assert os.fstat(fd).st_size == SIZE
        assert os.fstat(fd).st_blocks * 512 >= SIZE
    finally:
        os.close(fd)
    read_only = os.open(path, os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            reserve_blocks(read_only, SIZE)
    finally:
        os.close(read_only)


def test_linux_path_uses_posix_fallocate(tmp_path: Path) -> None:
    assert hasattr(os, "posix_fallocate")  # the platform this project supports
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        reserve_blocks(fd, SIZE)
        assert os.fstat(fd).st_size == SIZE  # fallocate also extends the file
        assert os.fstat(fd).st_blocks * 512 >= SIZE
    finally:
        os.close(fd)
