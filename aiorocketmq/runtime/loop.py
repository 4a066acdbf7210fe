"""Process entry: choose the event loop, run ``main``, turn signals into a shutdown.

Owns: ``install_uvloop()``, ``loop_factory()`` and ``run()``, the helper every
CLI (``mqnamesrv``, ``mqbroker``...) uses as ``sys.exit(run(main))``, and
``serve_until_stopped()``, the wait each of them does once its service is up.

Shutdown protocol: ``run`` passes ``main`` an ``asyncio.Event``. The first
SIGTERM or SIGINT sets it; ``main`` then shuts its services down (flush, persist,
checkpoint) and returns its exit code. A second signal (the same one repeated within
1 s counts once), or ``shutdown_timeout_s``
passing after the first, cancels ``main``: the exit code is then 128 + the first
signal's number, as a shell reports a process killed by it.

Must not: be imported by library code for side effects (it has none at import),
call ``sys.exit`` itself, or install signal handlers outside ``run``.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
import time
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiorocketmq.runtime.lifecycle import Service

__all__ = [
    "MainFactory",
    "freeze_startup_objects",
    "install_uvloop",
    "loop_factory",
    "run",
    "serve_until_stopped",
]

logger = logging.getLogger(__name__)

#: ``main(shutdown_requested) -> exit code`` (None means 0).
MainFactory = Callable[[asyncio.Event], Coroutine[Any, Any, int | None]]

DEFAULT_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)

# Exit code when main raised: the conventional "general error".
EXIT_FAILURE = 1


def loop_factory(use_uvloop: bool = True) -> Callable[[], asyncio.AbstractEventLoop]:
    """Return a function creating a new event loop: uvloop's if wanted and present.

    This is the policy-free way to pick a loop (``asyncio.Runner(loop_factory=...)``);
    event-loop policies are deprecated from Python 3.14.

    Args:
        use_uvloop: Prefer uvloop; falls back to asyncio's loop if not installed.
    """
    if use_uvloop:
        try:
            import uvloop
        except ImportError:
            logger.warning("uvloop is not installed; using the asyncio event loop")
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def install_uvloop() -> bool:
    """Make uvloop the default loop for code that calls ``asyncio.run`` itself.

    Prefer ``run()`` or ``loop_factory()``, which need no global policy.

    Returns:
        True if uvloop is installed and now the policy, False if it is missing.
    """
    try:
        import uvloop
    except ImportError:
        return False
    with warnings.catch_warnings():
        # Policies are deprecated from Python 3.14; this is the legacy path.
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


def run(
    main: MainFactory,
    *,
    use_uvloop: bool = True,
    signals: Sequence[signal.Signals] = DEFAULT_SIGNALS,
    shutdown_timeout_s: float | None = None,
) -> int:
    """Run ``main(shutdown_requested)`` on a fresh loop and return an exit code.

    Args:
        main: Called once with the shutdown event; returns the exit code
            (None means 0). It should wait on the event (besides its own
            work), then shut down cleanly and return.
        use_uvloop: Run on uvloop if installed.
        signals: Signals that request a graceful shutdown. Handlers are only
            installed in the main thread; elsewhere a warning is logged.
        shutdown_timeout_s: If set, cancel ``main`` when it has not returned
            this long after the first signal.

    Returns:
        ``main``'s code; 1 if it raised (logged with its traceback); 128 + the
        first signal's number if it had to be cancelled.
    """
    with asyncio.Runner(loop_factory=loop_factory(use_uvloop)) as runner:
        return runner.run(_supervise(main, tuple(signals), shutdown_timeout_s))


#: The same signal again within this many seconds is the same request, not a second one.
REPEAT_WINDOW_S = 1.0


class _Shutdown:
    """Signal bookkeeping for one ``run``: first signal asks, second insists."""

    def __init__(self, timeout_s: float | None) -> None:
        self.requested = asyncio.Event()
        self.received: list[int] = []
        self.last_at = 0.0
        self.timeout_s = timeout_s
        self.main_task: asyncio.Task[int | None] | None = None

    def on_signal(self, signum: int) -> None:
        now = time.monotonic()
        name = signal.Signals(signum).name
        if self.received and signum == self.received[-1] and now - self.last_at < REPEAT_WINDOW_S:
            # One event delivered twice: a dying parent sends its parent-death signal
            # once per exiting thread, and a double Ctrl-C is one request.
            logger.debug("repeated signal ignored", extra={"signal": name})
            return
        self.received.append(signum)
        self.last_at = now
        if len(self.received) == 1:
            logger.info("shutdown requested", extra={"signal": name})
            self.requested.set()
            if self.timeout_s is not None:
                loop = asyncio.get_running_loop()
                loop.call_later(self.timeout_s, self._force, "shutdown timed out")
        else:
            self._force(f"second signal {name}")

    def _force(self, why: str) -> None:
        if self.main_task is not None and not self.main_task.done():
            logger.warning("cancelling main", extra={"reason": why})
            self.main_task.cancel()


async def _supervise(
    main: MainFactory, signals: tuple[signal.Signals, ...], timeout_s: float | None
) -> int:
    loop = asyncio.get_running_loop()
    state = _Shutdown(timeout_s)
    installed = _install_handlers(loop, signals, state.on_signal)
    try:
        state.main_task = loop.create_task(main(state.requested), name="main")
        try:
            code = await state.main_task
        except asyncio.CancelledError:
            if state.main_task.cancelled() and state.received:
                return 128 + state.received[0]
            raise
        except Exception:
            logger.exception("main failed")
            return EXIT_FAILURE
        return 0 if code is None else int(code)
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


def _install_handlers(
    loop: asyncio.AbstractEventLoop,
    signals: tuple[signal.Signals, ...],
    handler: Callable[[int], None],
) -> list[signal.Signals]:
    installed: list[signal.Signals] = []
    for sig in signals:
        try:
            loop.add_signal_handler(sig, handler, int(sig))
        except (ValueError, RuntimeError, NotImplementedError) as exc:
            # Not the main thread, or a platform without loop signal support.
            logger.warning("cannot handle signal", extra={"signal": sig.name, "error": str(exc)})
            continue
        installed.append(sig)
    return installed


def freeze_startup_objects() -> None:
    """Move what start-up made out of the cyclic collector's reach (``gc.freeze``).

    A daemon calls it once started, before it says it is ready: the objects alive
    then (modules, classes, configs: tens of thousands) live as long as the process,
    yet each full collection walked them all, holding the broker's loop ~12 ms under
    load. The one collection before freezing blocks the loop too, so it happens before
    the ready line, not after it, while clients act on that line.
    """
    gc.collect()
    gc.freeze()


READY_FILE_ENV = "AIOROCKETMQ_READY_FILE"
"""Names a file that ``announce_ready`` also writes the ready line to (the container
healthcheck reads the role and the address the node really bound from it)."""


def announce_ready(line: str, environ: Mapping[str, str] | None = None) -> None:
    """Print a daemon's one machine-readable ready line, and write it to the file
    ``$AIOROCKETMQ_READY_FILE`` names, if any.

    The file is replaced whole (written beside it, then renamed), so a reader never
    sees half a line. A file that cannot be written is logged, not fatal: the node
    serves either way, only a healthcheck that reads the file would fail.
    """
    print(line, flush=True)
    target = (os.environ if environ is None else environ).get(READY_FILE_ENV)
    if not target:
        return
    path = Path(target)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        temp.write_text(line + "\n", "utf-8")
        temp.replace(path)
    except OSError as exc:
        logger.warning("cannot write the ready file", extra={"path": target, "error": str(exc)})


async def serve_until_stopped(
    service: Service, shutdown: asyncio.Event, fatal: asyncio.Event
) -> int:
    """Wait for ``shutdown`` (a signal) or ``fatal`` (a background part died), then
    shut ``service`` down; the exit code: 1 when ``fatal`` was set, else 0."""
    stop = asyncio.ensure_future(shutdown.wait())
    died = asyncio.ensure_future(fatal.wait())
    try:
        await asyncio.wait([stop, died], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        died.cancel()
        await service.shutdown()
    return 1 if fatal.is_set() else 0
