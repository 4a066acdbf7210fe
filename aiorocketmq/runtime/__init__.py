"""aiorocketmq.runtime: lifecycle, owned tasks, blocking executor, logging, loop entry.

Owns: the pieces every long-lived component shares (L1 in ARCHITECTURE.md).
``Service`` gives start / idempotent shutdown and supervised owned tasks,
``BlockingExecutor`` moves ``*_blocking`` work off the loop (``CallThreads``, in
``call_threads``, many short calls with batched hand-offs), ``setup_logging`` and
``kv`` give one-line key=value logs, ``run`` is the CLI entry with graceful
SIGTERM/SIGINT handling.

Must not: import anything of ours but ``aiorocketmq.common``, nor know about
sockets, stores or the remoting protocol.
"""

from __future__ import annotations

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import (
    BackgroundTaskError,
    Periodic,
    Service,
    ServiceState,
    ServiceStateError,
    TaskFailure,
)
from aiorocketmq.runtime.logging import get_logger, kv, setup_logging
from aiorocketmq.runtime.loop import (
    announce_ready,
    freeze_startup_objects,
    install_uvloop,
    loop_factory,
    run,
    serve_until_stopped,
)

__all__ = [
    "BackgroundTaskError",
    "BlockingExecutor",
    "Periodic",
    "Service",
    "ServiceState",
    "ServiceStateError",
    "TaskFailure",
    "announce_ready",
    "freeze_startup_objects",
    "get_logger",
    "install_uvloop",
    "kv",
    "loop_factory",
    "run",
    "serve_until_stopped",
    "setup_logging",
]
