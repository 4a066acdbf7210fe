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


def _use_kernel(
    implementation: str, monkeypatch: pytest.MonkeyPatch, module: str, kernel: str
) -> None:
    """Set ``module``'s ``_KERNEL`` to the compiled ``kernel`` ("c") or None ("python")."""
    target = importlib.import_module(module)
    compiled = kernel_or_skip(kernel) if implementation == "c" else None
    monkeypatch.setattr(target, "_KERNEL", compiled)


_RECORD_KERNELS = "aiorocketmq.common._record_kernels"


def use_frame_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``remoting.frame`` and ``remoting.command`` (a request built in place) use
    their C kernel ("c") or the reference ("python")."""
    for module in ("aiorocketmq.remoting.frame", "aiorocketmq.remoting.command"):
        _use_kernel(implementation, monkeypatch, module, "aiorocketmq.remoting._frame_kernels")


def use_observe_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``ObservedProcessorTable`` time handlers in C ("c") or in Python ("python");
    a table registered before the switch keeps its handlers."""
    _use_kernel(
        implementation, monkeypatch, "aiorocketmq.remoting.metrics_http",
        "aiorocketmq.remoting._observe_kernels",
    )  # fmt: skip


def use_pulled_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``common.pulled_message`` decode in C ("c") or in Python ("python")."""
    _use_kernel(implementation, monkeypatch, "aiorocketmq.common.pulled_message", _RECORD_KERNELS)


def use_batch_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make batch puts encode in C ("c") or by the reference ("python")."""
    _use_kernel(implementation, monkeypatch, "aiorocketmq.common.record_encoder", _RECORD_KERNELS)


def use_index_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``IndexFile.put_hashes`` run in C ("c") or in numpy ("python"), and the
    index service gather a chunk's keys in C or in Python."""
    _use_kernel(
        implementation, monkeypatch, "aiorocketmq.store.index_file",
        "aiorocketmq.store._index_kernels",
    )  # fmt: skip
    _use_kernel(
        implementation, monkeypatch, "aiorocketmq.store.index_service",
        "aiorocketmq.common._hash_kernels",
    )  # fmt: skip


def use_batch_codec_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``batch_codec.count_batch_entries`` count in C ("c") or in Python."""
    _use_kernel(implementation, monkeypatch, "aiorocketmq.common.batch_codec", _RECORD_KERNELS)


def use_commit_log_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a batch append frame and patch its records in C ("c") or in Python, and a
    single put's or a batch put's records be encoded in place ("c") or not."""
    for module in ("aiorocketmq.store.commit_log", "aiorocketmq.store.commit_log_batch"):
        _use_kernel(implementation, monkeypatch, module, _RECORD_KERNELS)


def use_dispatch_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the dispatcher build its requests in C ("c") or from scanned records."""
    _use_kernel(implementation, monkeypatch, "aiorocketmq.store.dispatch_builder", _RECORD_KERNELS)


def use_dispatch_runs_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a reput chunk's grouping, unit packing and notices run in C ("c") or in
    Python ("python")."""
    _use_kernel(
        implementation, monkeypatch, "aiorocketmq.store.dispatch_request",
        "aiorocketmq.store._dispatch_kernels",
    )  # fmt: skip


def use_send_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``broker.plain_send`` hand out its C reader ("c") or the reference
    ("python") to send processors built from now on."""
    _use_kernel(
        implementation, monkeypatch, "aiorocketmq.broker.plain_send",
        "aiorocketmq.broker._send_kernels",
    )  # fmt: skip


def use_produce_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a send's header fields and its reply's ``SendResult`` come from C ("c") or
    from the reference ("python"), in the client API and the producer."""
    for module in ("aiorocketmq.client.mq_client_api", "aiorocketmq.client.producer"):
        _use_kernel(implementation, monkeypatch, module, "aiorocketmq.client._produce_kernels")


def use_scan_kernel(implementation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make a pull's vectorised scan cut its units in C ("c") or with numpy ("python")."""
    _use_kernel(
        implementation, monkeypatch, "aiorocketmq.store.get_runs",
        "aiorocketmq.store._scan_kernels",
    )  # fmt: skip
