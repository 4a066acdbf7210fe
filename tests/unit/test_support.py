"""The test infrastructure itself: wait helpers, child processes, the loop-error check."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import LOOP_ENV
from tests.support import ManagedProcess, PidRegistry, wait_until, wait_until_sync
from tests.support.vectors import VECTOR_FILES, locate_vectors_dir

# -- wait_until ---------------------------------------------------------------------


async def test_wait_until_returns_the_truthy_value() -> None:
    polls = iter([0, None, "", "ready"])
    assert await wait_until(lambda: next(polls), what="ready") == "ready"

    async def async_predicate() -> int:
        return 7

    assert await wait_until(async_predicate) == 7


async def test_wait_until_awaits_an_event() -> None:
    event = asyncio.Event()
    asyncio.get_running_loop().call_soon(event.set)
    assert await wait_until(event, what="event") is True


async def test_wait_until_names_what_and_the_last_value_on_timeout() -> None:
    with pytest.raises(AssertionError) as failed:
        await wait_until(lambda: [], timeout=0.02, what="queue to fill", describe=lambda: "empty")
    message = str(failed.value)
    assert "queue to fill" in message and "last observed: []" in message
    assert "state: 'empty'" in message
    with pytest.raises(AssertionError, match="event not set"):
        await wait_until(asyncio.Event(), timeout=0.01, what="never")


def test_wait_until_sync_twin() -> None:
    polls = iter([False, False, True])
    assert wait_until_sync(lambda: next(polls)) is True
    with pytest.raises(AssertionError, match=r"waiting for nothing; last observed: 0"):
        wait_until_sync(lambda: 0, timeout=0.02, what="nothing")


def test_wait_until_does_not_swallow_predicate_errors() -> None:
    def broken() -> bool:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        wait_until_sync(broken)


# -- ManagedProcess and PidRegistry -------------------------------------------------

SERVER = textwrap.dedent(
    """
    import os, signal, sys, threading
    if os.environ.get("IGNORE_TERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("booting", flush=True)
    print(f"READY addr=127.0.0.1:{40000 + os.getpid() % 1000}", flush=True)
    threading.Event().wait()
    """
)


def test_managed_process_exposes_ready_groups_and_stops_cleanly(tmp_path: Path) -> None:
    registry = PidRegistry()
    proc = ManagedProcess(
        ["-c", SERVER], name="srv", log_dir=tmp_path, registry=registry,
        ready=r"^READY addr=(?P<host>[\d.]+):(?P<port>\d+)$",
    )  # fmt: skip
    proc.start()
    assert registry.pids == [proc.pid]
    groups = proc.wait_ready(timeout=15)
    assert groups["host"] == "127.0.0.1" and int(groups["port"]) >= 40000
    # The default SIGTERM disposition kills Python: -15, but no SIGKILL needed.
    assert proc.stop(timeout=10) == -15
    assert not proc.killed and registry.pids == []
    assert proc.stop() == -15  # idempotent
    assert "booting" in proc.output()


def test_managed_process_sigkills_by_pid_when_sigterm_is_ignored(tmp_path: Path) -> None:
    proc = ManagedProcess(
        ["-c", SERVER], name="deaf", log_dir=tmp_path, ready="READY", env={"IGNORE_TERM": "1"}
    )
    proc.start()
    proc.wait_ready()
    assert proc.stop(timeout=0.3) == -9
    assert proc.killed


async def test_managed_process_async_helpers(tmp_path: Path) -> None:
    proc = ManagedProcess(
        ["-c", SERVER], name="srv", log_dir=tmp_path, ready="READY addr=(?P<a>\\S+)"
    )
    proc.start()
    assert "a" in await proc.wait_ready_async()
    assert await proc.stop_async() == -15


def test_managed_process_reports_an_early_exit_with_its_logs(tmp_path: Path) -> None:
    script = "import sys; print('starting'); sys.exit('bad config: listenPort')"
    proc = ManagedProcess(["-c", script], name="bad", log_dir=tmp_path, ready="READY")
    proc.start()
    with pytest.raises(AssertionError) as failed:
        proc.wait_ready(timeout=15)
    message = str(failed.value)
    assert "bad exited with code 1 before its ready line" in message
    assert "bad config: listenPort" in message and "starting" in message
    assert proc.stop() == 1


def test_log_files_of_same_named_processes_do_not_collide(tmp_path: Path) -> None:
    one = ManagedProcess(["-c", "pass"], name="x", log_dir=tmp_path)
    two = ManagedProcess(["-c", "pass"], name="x", log_dir=tmp_path)
    assert one.stdout_path != two.stdout_path
    assert two.stdout_path.name == "x-2.stdout.log"


def test_pid_registry_kills_leftovers_by_pid(tmp_path: Path) -> None:
    registry = PidRegistry()
    proc = ManagedProcess(["-c", SERVER], name="left", log_dir=tmp_path, registry=registry)
    proc.start()
    done = ManagedProcess(["-c", "pass"], name="done", log_dir=tmp_path, registry=registry)
    done.start()
    wait_until_sync(lambda: done.returncode is not None, timeout=15, what="short child exit")
    assert registry.kill_leftovers() == [proc.pid]
    assert proc.returncode == -9
    assert registry.pids == []


# -- the loop-error check (runs an inner pytest with this conftest's hooks) ---------

INNER_TESTS = textwrap.dedent(
    """
    import asyncio, os

    async def test_clean_on_the_chosen_loop():
        await asyncio.sleep(0)
        loop_module = type(asyncio.get_running_loop()).__module__
        assert loop_module.split(".")[0] == os.environ.get("AIOROCKETMQ_TEST_LOOP", "uvloop")

    async def test_orphan_task_dies():
        async def boom():
            raise RuntimeError("unobserved boom")
        task = asyncio.get_running_loop().create_task(boom())
        await asyncio.sleep(0)
        del task

    async def test_callback_raises():
        def bad():
            raise ValueError("bad callback")
        asyncio.get_running_loop().call_soon(bad)
        await asyncio.sleep(0)

    async def test_expected_error_is_consumed(loop_errors):
        async def boom():
            raise RuntimeError("expected")
        task = asyncio.get_running_loop().create_task(boom())
        await asyncio.sleep(0)
        del task
        import gc; gc.collect()
        assert [type(c["exception"]) for c in loop_errors.take()] == [RuntimeError]

    PENDING = []

    async def test_task_raises_when_cancelled_at_loop_close():
        async def stubborn():
            try:
                await asyncio.Event().wait()
            finally:
                raise OSError("raised while cancelled")
        PENDING.append(asyncio.get_running_loop().create_task(stubborn()))
        await asyncio.sleep(0)
    """
)


@pytest.mark.parametrize("loop_name", ["uvloop", "asyncio"])
def test_loop_error_check_fails_the_offending_tests(
    tmp_path: Path, repo_root: Path, loop_name: str
) -> None:
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n"
    )
    (tmp_path / "conftest.py").write_text("from tests.conftest import *  # noqa: F403\n")
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {**os.environ, "PYTHONPATH": str(repo_root), LOOP_ENV: loop_name, "COLUMNS": "400"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:cacheprovider", "test_inner.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert re.search(r"FAILED test_inner.py::test_orphan_task_dies - .*never retrieved", out), out
    assert re.search(
        r"FAILED test_inner.py::test_callback_raises - .*Exception in callback.*bad callback", out
    ), out
    assert re.search(
        r"ERROR test_inner.py::test_task_raises_when_cancelled_at_loop_close - .*at teardown"
        r".*OSError\('raised while cancelled'\)",
        out,
    ), out
    assert re.search(r"2 failed, 3 passed, 1 error", out), out


# -- vectors_dir --------------------------------------------------------------------


def test_vectors_dir_is_inside_the_repository(vectors_dir: Path, repo_root: Path) -> None:
    assert vectors_dir.resolve() == (repo_root / "tests" / "vectors").resolve()
    for name in VECTOR_FILES:
        assert (vectors_dir / name).stat().st_size > 0, name


def test_vectors_dir_missing_files_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="vectors directory not found"):
        locate_vectors_dir(tmp_path / "nowhere")
    (tmp_path / "cpp_client.jsonl").write_text("{}\n", "utf-8")
    with pytest.raises(LookupError, match=r"alions_client\.jsonl, stored_messages\.jsonl"):
        locate_vectors_dir(tmp_path)
