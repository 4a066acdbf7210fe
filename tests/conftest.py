"""Hooks and fixtures every test tier shares.

Owns:

- the event-loop switch: ``AIOROCKETMQ_TEST_LOOP=uvloop`` (default) or
  ``asyncio``, applied through pytest-asyncio's ``pytest_asyncio_loop_factories``
  hook (1.x; overriding the ``event_loop_policy`` fixture is deprecated there);
- the loop-error check: every loop the suite creates gets an exception handler
  that records what the loop reports (a task or future whose exception nobody
  retrieved, an exception in a callback, an error while the loop shut down); a
  test during or after which anything was recorded fails, naming it. Tests that
  provoke such an error on purpose consume it with the ``loop_errors`` fixture;
- ``pid_registry``: the session's child PIDs, leftovers killed by PID at the end;
- ``start_process``: ``ManagedProcess`` factory whose teardown stops what is
  still running and asserts a clean exit;
- ``vectors_dir``: ``tests/vectors``, the captured client frames and stored records;
- the terminal summary's extra lines (leftover PIDs killed, chaos reports), also
  under pytest-xdist (``make test`` runs two workers): each worker hands its lines
  to the controller in ``workeroutput`` when it finishes.

Must not: hard-code absolute paths or ports, skip tests for missing inputs
(a missing vectors directory is a failure), or sleep.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from pytest_asyncio import is_async_test

from tests.chaos.report import REPORT_LINES
from tests.support.procs import ManagedProcess, PidRegistry
from tests.support.vectors import locate_vectors_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
LOOP_ENV = "AIOROCKETMQ_TEST_LOOP"
LOOP_CHOICES = ("uvloop", "asyncio")


# -- event loop choice and the loop-error check -------------------------------------


class LoopErrorLog:
    """What event loops reported through their exception handler."""

    def __init__(self) -> None:
        self.contexts: list[dict[str, Any]] = []

    def handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Loop exception handler: record, then log as asyncio would."""
        self.contexts.append(context)
        loop.default_exception_handler(context)

    def take(self) -> list[dict[str, Any]]:
        """Return and forget everything recorded so far."""
        taken, self.contexts = self.contexts, []
        return taken

    @staticmethod
    def describe(contexts: Sequence[Mapping[str, Any]]) -> str:
        lines = []
        for ctx in contexts:
            exc = ctx.get("exception")
            where = ctx.get("task") or ctx.get("future") or ctx.get("handle") or ""
            lines.append(f"- {ctx.get('message')}: {exc!r} {where!r}".rstrip())
        return "\n".join(lines)


_LOOP_ERRORS = pytest.StashKey[LoopErrorLog]()
_LOOP_FACTORY = pytest.StashKey[Callable[[], asyncio.AbstractEventLoop]]()
_LEFTOVER_PIDS = pytest.StashKey[list[int]]()


def _loop_choice() -> str:
    choice = os.environ.get(LOOP_ENV, "uvloop").strip().lower() or "uvloop"
    if choice not in LOOP_CHOICES:
        raise pytest.UsageError(f"{LOOP_ENV}={choice!r}: expected one of {LOOP_CHOICES}")
    return choice


def _base_loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if choice == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError as exc:
        raise pytest.UsageError(f"{LOOP_ENV}=uvloop but uvloop is not installed") from exc
    return uvloop.new_event_loop


def pytest_configure(config: pytest.Config) -> None:
    errors = LoopErrorLog()
    base = _base_loop_factory(_loop_choice())

    def new_loop() -> asyncio.AbstractEventLoop:
        loop = base()
        loop.set_exception_handler(errors.handler)
        return loop

    config.stash[_LOOP_ERRORS] = errors
    # One factory object for the whole session: pytest-asyncio parametrizes the
    # loop fixture with it, and an equal param lets wider loop scopes be shared.
    config.stash[_LOOP_FACTORY] = new_loop
    config.stash[_LEFTOVER_PIDS] = []


def pytest_report_header(config: pytest.Config) -> str:
    return f"event loop: {_loop_choice()} (set {LOOP_ENV}=uvloop|asyncio)"


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    return {_loop_choice(): config.stash[_LOOP_FACTORY]}


def _check_loop_errors(item: pytest.Item, phase: str) -> Generator[None, object, object]:
    """Body of the call/teardown wrappers: fail if a loop reported an error."""
    errors = item.config.stash[_LOOP_ERRORS]
    try:
        result = yield
    except BaseException as exc:
        if is_async_test(item):
            gc.collect()
        reported = errors.take()
        if reported:
            exc.add_note(f"event loop reported {phase}:\n{LoopErrorLog.describe(reported)}")
        raise
    if is_async_test(item):
        gc.collect()  # finalizes unreferenced failed tasks, so they report now
    reported = errors.take()
    if reported:
        first = reported[0]
        pytest.fail(
            f"event loop reported {len(reported)} error(s) {phase}: "
            f"{first.get('message')}: {first.get('exception')!r}\n"
            f"{LoopErrorLog.describe(reported)}\n"
            "(a task died with nobody awaiting it, a callback raised, or the loop failed "
            "at shutdown; a test expecting this takes it from the loop_errors fixture)",
            pytrace=False,
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    return (yield from _check_loop_errors(item, "while the test ran"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    return (yield from _check_loop_errors(item, "at teardown (fixtures, loop shutdown)"))


@pytest.fixture
def loop_errors(pytestconfig: pytest.Config) -> LoopErrorLog:
    """The loop-error log, for tests that provoke a loop error on purpose.

    Call ``loop_errors.take()`` in the test to consume the expected errors.
    """
    return pytestconfig.stash[_LOOP_ERRORS]


# -- child processes ----------------------------------------------------------------


@pytest.fixture(scope="session")
def pid_registry(pytestconfig: pytest.Config) -> Iterator[PidRegistry]:
    """Every child PID started in the session; leftovers are SIGKILLed by PID."""
    registry = PidRegistry()
    yield registry
    pytestconfig.stash[_LEFTOVER_PIDS].extend(registry.kill_leftovers())


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """xdist scheduling groups (``make test`` runs ``--dist loadgroup``): a module's
    tests stay on one worker (module-scoped clusters start once), and every Spark
    test shares one worker (a SparkSession takes ~15 s to start).

    ``tryfirst``: an xdist worker turns the markers into the ``@group`` suffix of node
    ids in a hook of its own, registered after this conftest, so called before it;
    it saw no marker, and every test was scheduled alone (tests/docker then ran on
    both workers at once: two engines, two image builds).
    """
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        module = item.nodeid.split("::", 1)[0]
        group = "spark" if item.get_closest_marker("spark") is not None else module
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_sessionfinish(session: pytest.Session) -> None:
    # An xdist worker: its terminal summary is never shown, so hand the lines over.
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["leftover_pids"] = list(session.config.stash.get(_LEFTOVER_PIDS, []))
        output["chaos_report_lines"] = list(REPORT_LINES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist controller: collect what a finished worker handed over."""
    output = getattr(node, "workeroutput", {})
    node.config.stash.setdefault(_LEFTOVER_PIDS, []).extend(output.get("leftover_pids", []))
    REPORT_LINES.extend(output.get("chaos_report_lines", []))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    leftovers = config.stash.get(_LEFTOVER_PIDS, [])
    if leftovers:
        terminalreporter.write_line(
            f"killed leftover child processes by PID at session end: {leftovers}", red=True
        )
    if REPORT_LINES:
        terminalreporter.section("chaos reports")
        for line in REPORT_LINES:
            terminalreporter.write_line(line)


@pytest.fixture
def start_process(
    pid_registry: PidRegistry, tmp_path: Path
) -> Iterator[Callable[..., ManagedProcess]]:
    """Factory: ``start_process(args, name=..., ready=regex) -> ManagedProcess``.

    Starts ``sys.executable *args`` (cwd: the repo root; logs in ``tmp_path``)
    and, when ``ready`` is given and ``wait`` is true, blocks until the ready
    line (in async tests pass ``wait=False`` and ``await proc.wait_ready_async()``).
    Teardown stops whatever is still running and fails unless it exits with 0.
    """
    started: list[ManagedProcess] = []

    def factory(
        args: Sequence[str],
        *,
        name: str,
        ready: str | None = None,
        wait: bool = True,
        ready_timeout: float = 15.0,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
    ) -> ManagedProcess:
        proc = ManagedProcess(
            args,
            name=name,
            log_dir=tmp_path / "procs",
            registry=pid_registry,
            ready=ready,
            env=env,
            cwd=cwd if cwd is not None else REPO_ROOT,
        )
        started.append(proc.start())
        if ready is not None and wait:
            proc.wait_ready(ready_timeout)
        return proc

    yield factory
    unclean = []
    for proc in reversed(started):
        if proc.running and proc.stop() != 0:
            unclean.append(f"{proc!r} (killed={proc.killed})\n{proc.tail()}")
    if unclean:
        pytest.fail("processes did not exit cleanly on SIGTERM:\n" + "\n".join(unclean))


# -- shared inputs ------------------------------------------------------------------


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root (the directory holding pyproject.toml)."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    """The golden vectors captured from stock clients; missing is a failure, not a skip."""
    try:
        return locate_vectors_dir()
    except LookupError as exc:
        pytest.fail(str(exc), pytrace=False)
