"""Run a test against both the C kernels and the pure-Python reference code.

``kernel_or_skip(name)`` gives the compiled module for the "c" side of a parametrised
test. When it is not built the test fails, naming the fix, unless the run asked for
the pure-Python code (``AIOROCKETMQ_NO_EXTENSIONS=1``): then that side is skipped.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from aiorocketmq.common.kernels import NO_EXTENSIONS_ENV, extensions_disabled

#: The two sides a kernel test runs on.
IMPLEMENTATIONS = ("python", "c")


def kernel_or_skip(name: str) -> ModuleType:
    """The compiled module ``name``; skip when disabled, fail when it was not built."""
    if extensions_disabled():
        pytest.skip(f"{NO_EXTENSIONS_ENV} is set: the C kernels are off")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pytest.fail(f"{name} is not built ({exc}): run `pip install -e .` with a C compiler")


def use_frame_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``remoting.frame`` use its C kernel ("c") or the reference ("python")."""
    from aiorocketmq.remoting import frame

    kernel = None
    if implementation == "c":
        kernel = kernel_or_skip("aiorocketmq.remoting._frame_kernels")
    monkeypatch.setattr(frame, "_KERNEL", kernel)


def use_pulled_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``common.pulled_message`` decode in C ("c") or in Python ("python")."""
    from aiorocketmq.common import pulled_message

    kernel = None
    if implementation == "c":
        kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    monkeypatch.setattr(pulled_message, "_KERNEL", kernel)


def use_batch_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make batch puts encode in C ("c") or by the reference ("python")."""
    from aiorocketmq.common import record_encoder

    kernel = None
    if implementation == "c":
        kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    monkeypatch.setattr(record_encoder, "_KERNEL", kernel)


def use_index_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``IndexFile.put_hashes`` run in C ("c") or in numpy ("python")."""
    from aiorocketmq.store import index_file

    kernel = None
    if implementation == "c":
        kernel = kernel_or_skip("aiorocketmq.store._index_kernels")
    monkeypatch.setattr(index_file, "_KERNEL", kernel)


def use_commit_log_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a batch append frame and patch its records in C ("c") or in Python."""
    from aiorocketmq.store import commit_log

    kernel = None
    if implementation == "c":
        kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    monkeypatch.setattr(commit_log, "_KERNEL", kernel)


def use_dispatch_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the dispatcher build its requests in C ("c") or from scanned records."""
    from aiorocketmq.store import dispatch_builder

    kernel = None
    if implementation == "c":
        kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    monkeypatch.setattr(dispatch_builder, "_KERNEL", kernel)
