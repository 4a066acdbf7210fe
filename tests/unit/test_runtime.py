"""aiorocketmq.runtime: lifecycle, periodic jobs, executor, logging, loop entry."""

from __future__ import annotations

import asyncio
import inspect
import io
import itertools
import json
import logging
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aiorocketmq.runtime import (
    BackgroundTaskError,
    BlockingExecutor,
    Service,
    ServiceState,
    ServiceStateError,
    announce_ready,
    get_logger,
    install_uvloop,
    kv,
    loop_factory,
    run,
    setup_logging,
)
from aiorocketmq.runtime.logging import KeyValueFormatter
from aiorocketmq.runtime.loop import READY_FILE_ENV
from tests.support import ManagedProcess, wait_until, wait_until_sync

LIFECYCLE_LOGGER = "aiorocketmq.runtime.lifecycle"


class Recorder(Service):
    """A service that counts its hook calls."""

    def __init__(self) -> None:
        super().__init__("recorder")
        self.started = 0
        self.stopped = 0

    async def on_start(self) -> None:
        self.started += 1

    async def on_shutdown(self) -> None:
        self.stopped += 1


async def _forever() -> None:
    await asyncio.get_running_loop().create_future()


# -- lifecycle ----------------------------------------------------------------------


async def test_start_is_idempotent() -> None:
    svc = Recorder()
    await asyncio.gather(svc.start(), svc.start())
    await svc.start()
    assert svc.started == 1
    assert svc.state is ServiceState.RUNNING and svc.running
    await svc.shutdown()


async def test_shutdown_is_idempotent_and_concurrent_calls_share_it() -> None:
    svc = Recorder()
    await svc.start()
    await asyncio.gather(svc.shutdown(), svc.shutdown(), svc.shutdown())
    await svc.shutdown()
    assert svc.stopped == 1
    assert svc.state is ServiceState.STOPPED
    assert svc.stopping.is_set()


async def test_start_after_shutdown_is_an_error() -> None:
    svc = Recorder()
    await svc.start()
    await svc.shutdown()
    with pytest.raises(ServiceStateError, match="start\\(\\) after shutdown"):
        await svc.start()
    assert svc.started == 1


async def test_shutdown_before_start_skips_the_hook_and_forbids_start() -> None:
    svc = Recorder()
    await svc.shutdown()
    assert svc.stopped == 0
    assert svc.state is ServiceState.STOPPED
    with pytest.raises(ServiceStateError):
        await svc.start()


async def test_shutdown_cancels_and_awaits_owned_tasks() -> None:
    svc = Service("owner")
    await svc.start()
    entered: list[str] = []
    cleaned_up: list[str] = []

    async def worker(tag: str) -> None:
        entered.append(tag)
        try:
            await _forever()
        finally:
            cleaned_up.append(tag)

    tasks = [svc.spawn(worker(tag), name=tag) for tag in ("a", "b")]
    assert [t.get_name() for t in tasks] == ["owner:a", "owner:b"]
    assert svc.tasks == frozenset(tasks)
    await wait_until(lambda: len(entered) == 2, what="both tasks running", describe=lambda: entered)
    await svc.shutdown()
    # Awaited, not just cancelled: their finally blocks have already run.
    assert sorted(cleaned_up) == ["a", "b"]
    assert all(t.cancelled() for t in tasks)
    assert svc.tasks == frozenset()
    assert svc.failures == []


async def test_spawn_after_shutdown_is_refused_and_closes_the_coroutine() -> None:
    svc = Service()
    await svc.start()
    await svc.shutdown()
    coro = _forever()
    with pytest.raises(ServiceStateError, match="spawn"):
        svc.spawn(coro, name="late")
    # Closed, so no "coroutine was never awaited" warning (an error here).
    assert inspect.getcoroutinestate(coro) == inspect.CORO_CLOSED


async def test_failed_task_is_logged_once_and_surfaced(caplog: pytest.LogCaptureFixture) -> None:
    svc = Service("client")
    await svc.start()

    async def doomed() -> None:
        raise ConnectionResetError("broker went away")

    with caplog.at_level(logging.ERROR, logger=LIFECYCLE_LOGGER):
        task = svc.spawn(doomed(), name="heartbeat")
        await wait_until(lambda: svc.failures, what="failure recorded", describe=lambda: task)
    [failure] = svc.failures
    assert failure.task_name == "client:heartbeat"
    assert isinstance(failure.exc, ConnectionResetError)
    [record] = [r for r in caplog.records if r.name == LIFECYCLE_LOGGER]
    assert record.levelno == logging.ERROR
    assert record.__dict__["task"] == "client:heartbeat"
    assert record.__dict__["service"] == "client"
    assert record.exc_info is not None and record.exc_info[1] is failure.exc
    with pytest.raises(BackgroundTaskError, match="client:heartbeat") as raised:
        svc.raise_if_failed()
    assert raised.value.__cause__ is failure.exc
    await svc.shutdown()


async def test_on_task_failed_override_can_request_an_orderly_shutdown() -> None:
    class Server(Service):
        def __init__(self) -> None:
            super().__init__("server")
            self.shutdown_requested = asyncio.Event()
            self.seen: list[BaseException] = []

        def on_task_failed(self, task: asyncio.Task[object], exc: BaseException) -> None:
            self.seen.append(exc)
            self.shutdown_requested.set()

    async def crash() -> None:
        raise OSError("disk full")

    server = Server()
    await server.start()
    server.spawn(crash(), name="flush")
    await wait_until(server.shutdown_requested, what="shutdown requested")
    await server.shutdown()
    assert [type(e) for e in server.seen] == [OSError]
    assert server.failures == []  # the override replaced the default
    assert server.state is ServiceState.STOPPED


async def test_failing_on_start_cancels_what_it_spawned() -> None:
    class Broken(Service):
        async def on_start(self) -> None:
            self.spawned = self.spawn(_forever(), name="early")
            raise RuntimeError("bad config")

    svc = Broken()
    with pytest.raises(RuntimeError, match="bad config"):
        await svc.start()
    assert svc.spawned.cancelled()
    assert svc.state is ServiceState.STOPPED
    with pytest.raises(ServiceStateError):
        await svc.start()


# -- periodic -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_periodic_runs_sync_and_async_callables(kind: str) -> None:
    calls: list[float] = []
    loop = asyncio.get_running_loop()

    def tick() -> None:
        calls.append(loop.time())

    async def atick() -> None:
        calls.append(loop.time())

    svc = Service()
    await svc.start()
    # 20 ms, not 2: uvloop's clock and timers tick in whole milliseconds, so a
    # 2 ms interval measured 1 ms apart now and then (quantisation, not a burst).
    job = svc.periodic(0.02, tick if kind == "sync" else atick, name="tick", initial_delay_s=0)
    await wait_until(lambda: job.runs >= 3, what="three runs", describe=lambda: job)
    await svc.shutdown()
    assert len(calls) == job.runs >= 3
    assert job.failures == 0
    # Runs start about interval_s apart (never back to back in a burst).
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert min(gaps) >= 0.015


async def test_periodic_survives_a_failing_run(caplog: pytest.LogCaptureFixture) -> None:
    attempts = 0

    def flaky() -> None:
        nonlocal attempts
        attempts += 1
        if attempts == 2:
            raise OSError("transient")

    svc = Service()
    await svc.start()
    with caplog.at_level(logging.DEBUG, logger=LIFECYCLE_LOGGER):
        job = svc.periodic(0.001, flaky, name="flaky", initial_delay_s=0)
        await wait_until(lambda: job.runs >= 4, what="runs after the failure", describe=lambda: job)
        await svc.shutdown()
    assert job.failures == 1 and job.consecutive_failures == 0
    assert isinstance(job.last_exc, OSError)
    assert svc.failures == []  # one bad run is not a dead task
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert ("ERROR", "periodic run failed") in messages
    assert ("INFO", "periodic run recovered") in messages


async def test_periodic_logs_a_failure_streak_once(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> None:
        raise OSError("still down")

    svc = Service()
    await svc.start()
    with caplog.at_level(logging.DEBUG, logger=LIFECYCLE_LOGGER):
        job = svc.periodic(0.001, broken, name="broken", initial_delay_s=0)
        await wait_until(lambda: job.failures >= 5, what="five failures", describe=lambda: job)
        await svc.shutdown()
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1, [r.getMessage() for r in errors]
    assert job.consecutive_failures == job.failures >= 5


async def test_shutdown_wakes_a_waiting_periodic_job_at_once() -> None:
    class Patient(Service):
        shutdown_grace_s = 5.0  # long enough that a cancel would show

    svc = Patient()
    await svc.start()
    job = svc.periodic(3600.0, lambda: None, name="hourly")
    await wait_until(lambda: job.task is not None and not job.task.done(), what="job waiting")
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with asyncio.timeout(2.0):
        await svc.shutdown()
    assert loop.time() - began < 1.0
    assert job.task is not None and job.task.done() and not job.task.cancelled()
    assert job.runs == 0


async def test_wakeup_runs_a_periodic_job_now() -> None:
    svc = Service()
    await svc.start()
    job = svc.periodic(3600.0, lambda: None, name="rebalance")
    job.wakeup()
    await wait_until(lambda: job.runs == 1, what="woken run", describe=lambda: job)
    await svc.shutdown()


async def test_periodic_rejects_bad_intervals() -> None:
    svc = Service()
    await svc.start()
    with pytest.raises(ValueError, match="interval_s"):
        svc.periodic(0, lambda: None, name="zero")
    with pytest.raises(ValueError, match="initial_delay_s"):
        svc.periodic(1.0, lambda: None, name="neg", initial_delay_s=-1)
    await svc.shutdown()


# -- executor -----------------------------------------------------------------------


def _thread_name_blocking() -> str:
    return threading.current_thread().name


def _add_blocking(a: int, b: int) -> int:
    return a + b


def _fail_blocking(message: str) -> None:
    raise ValueError(message)


async def test_executor_runs_in_a_named_thread_and_returns_results() -> None:
    async with BlockingExecutor("store-flush", max_workers=2) as executor:
        name = await executor.run(_thread_name_blocking)
        assert name.startswith("store-flush")
        assert name != threading.current_thread().name
        assert await executor.run(_add_blocking, 2, 3) == 5
    assert executor.closed


async def test_executor_propagates_exceptions_unchanged() -> None:
    async with BlockingExecutor("store-clean") as executor:
        with pytest.raises(ValueError, match="no such file"):
            await executor.run(_fail_blocking, "no such file")
        assert await executor.run(_add_blocking, 1, 1) == 2  # still usable


async def test_executor_shutdown_waits_for_running_work_then_refuses_more() -> None:
    executor = BlockingExecutor("store-warm")
    started, release = threading.Event(), threading.Event()

    def warm_blocking() -> str:
        started.set()
        if not release.wait(10):
            raise TimeoutError("never released")
        return "warmed"

    work = asyncio.ensure_future(executor.run(warm_blocking))
    await wait_until(started.is_set, what="work started in the pool")
    assert executor.pending == 1
    closing = asyncio.ensure_future(executor.shutdown())
    await asyncio.sleep(0)
    assert not closing.done()  # the function is blocked; shutdown must wait
    release.set()
    await closing
    assert await work == "warmed"
    assert executor.pending == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("store-warm")]
    with pytest.raises(ServiceStateError):
        await executor.run(_add_blocking, 1, 2)
    await executor.shutdown()  # idempotent


def test_executor_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="name"):
        BlockingExecutor("")
    with pytest.raises(ValueError, match="max_workers"):
        BlockingExecutor("x", max_workers=0)
    with pytest.raises(ValueError, match="nice"):
        BlockingExecutor("x", nice=-1)


def _os_thread_blocking() -> tuple[str, int]:
    tid = threading.get_native_id()
    comm = Path(f"/proc/self/task/{tid}/comm").read_text("utf-8").strip()
    return comm, os.getpriority(os.PRIO_PROCESS, tid)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
async def test_executor_threads_carry_their_os_name_and_lower_priority() -> None:
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    async with BlockingExecutor("store-allocate-long-name", nice=3) as executor:
        comm, nice = await executor.run(_os_thread_blocking)
    assert comm == "store-allocate-"  # the kernel keeps 15 bytes
    assert nice == min(19, mine + 3)
    async with BlockingExecutor("plain") as executor:
        assert await executor.run(_os_thread_blocking) == ("plain", mine)


def _policy_blocking() -> tuple[int, int]:
    return os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
async def test_executor_idle_threads_run_under_sched_idle_or_at_nice_19(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    async with BlockingExecutor("warm", idle=True) as executor:
        assert (await executor.run(_policy_blocking))[0] == os.SCHED_IDLE
    assert os.sched_getscheduler(0) != os.SCHED_IDLE, "only the pool's threads"

    def refuse(*args: object) -> None:
        raise PermissionError(1, "refused by a sandbox")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    async with BlockingExecutor("warm", idle=True) as executor:
        assert await executor.run(_policy_blocking) == (os.SCHED_OTHER, min(19, mine + 19))


async def test_executor_prestart_starts_every_worker_before_any_work() -> None:
    executor = BlockingExecutor("prestarted", max_workers=3, prestart=True)
    try:
        assert len([t for t in threading.enumerate() if t.name.startswith("prestarted")]) == 3
        assert await executor.run(_add_blocking, 2, 2) == 4
    finally:
        await executor.shutdown()


# -- logging ------------------------------------------------------------------------


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger, with its handlers and level restored afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield root
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


TEXT_LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO aiorocketmq\.test: queue created "
    r"component=broker topic=T queue_id=1$"
)


def test_logging_renders_context_as_key_value(root_logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("INFO", stream=out)
    log = logging.getLogger("aiorocketmq.test")
    log.info("queue created", extra=kv(component="broker", topic="T", queue_id=1))
    log.debug("quiet by default: not shown")
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert TEXT_LINE.match(lines[0]), lines[0]


def test_logging_keeps_one_line_per_record(root_logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging(stream=out)
    log = logging.getLogger("aiorocketmq.test")
    try:
        raise OSError("disk\nfull")
    except OSError:
        log.exception("flush failed", extra=kv(path="/tmp/a b", empty=""))
    [line] = out.getvalue().splitlines()
    assert 'path="/tmp/a b"' in line and 'empty=""' in line
    assert "exc=" in line and "OSError: disk\\nfull" in line


def test_logging_json_lines(root_logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("DEBUG", json=True, stream=out)
    log = get_logger("aiorocketmq.test", component="namesrv")
    log.debug("broker registered", extra=kv(broker_name="broker-a", broker_id=0))
    [line] = out.getvalue().splitlines()
    doc = json.loads(line)
    assert doc["level"] == "DEBUG" and doc["logger"] == "aiorocketmq.test"
    assert doc["msg"] == "broker registered"
    assert doc["component"] == "namesrv"
    assert doc["broker_name"] == "broker-a" and doc["broker_id"] == 0


def test_setup_logging_is_idempotent(root_logger: logging.Logger) -> None:
    first, second = io.StringIO(), io.StringIO()
    setup_logging(stream=first)
    handler = setup_logging("WARNING", stream=second)
    ours = [h for h in root_logger.handlers if isinstance(h.formatter, KeyValueFormatter)]
    assert ours == [handler]
    assert root_logger.level == logging.WARNING
    logging.getLogger("aiorocketmq.test").warning("once")
    assert first.getvalue() == ""
    assert second.getvalue().count("once") == 1


def test_bound_context_and_kv_validation() -> None:
    log = get_logger("aiorocketmq.test", component="broker").bind(broker_name="a")
    assert log.extra == {"component": "broker", "broker_name": "a"}
    with pytest.raises(KeyError, match="msg"):
        kv(msg="clashes with LogRecord.msg")
    with pytest.raises(ValueError, match="level"):
        setup_logging("LOUD")


# -- loop entry ---------------------------------------------------------------------


async def test_suite_runs_on_the_selected_loop() -> None:
    expected = os.environ.get("AIOROCKETMQ_TEST_LOOP", "uvloop")
    loop = asyncio.get_running_loop()
    assert type(loop).__module__.split(".")[0] == expected


@pytest.mark.parametrize("use_uvloop", [True, False])
def test_run_returns_mains_exit_code(use_uvloop: bool) -> None:
    seen: list[str] = []

    async def main(shutdown: asyncio.Event) -> int:
        seen.append(type(asyncio.get_running_loop()).__module__.split(".")[0])
        assert not shutdown.is_set()
        return 3

    assert run(main, use_uvloop=use_uvloop) == 3
    assert seen == ["uvloop" if use_uvloop else "asyncio"]


def test_run_maps_none_to_0_and_a_crash_to_1(caplog: pytest.LogCaptureFixture) -> None:
    async def quiet(shutdown: asyncio.Event) -> None:
        return None

    async def crash(shutdown: asyncio.Event) -> int:
        raise RuntimeError("boom")

    assert run(quiet) == 0
    with caplog.at_level(logging.ERROR, logger="aiorocketmq.runtime.loop"):
        assert run(crash) == 1
    [record] = caplog.records
    assert record.getMessage() == "main failed" and record.exc_info is not None


def test_install_uvloop_sets_the_policy() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        before = asyncio.get_event_loop_policy()
        try:
            assert install_uvloop() is True
            assert type(asyncio.get_event_loop_policy()).__module__.startswith("uvloop")
        finally:
            asyncio.set_event_loop_policy(before)
    assert loop_factory(use_uvloop=False) is asyncio.new_event_loop


CHILD_MAIN = textwrap.dedent(
    """
    import asyncio, os, sys
    from aiorocketmq.runtime import run, setup_logging

    async def main(shutdown: asyncio.Event) -> int:
        loop = type(asyncio.get_running_loop()).__module__.split(".")[0]
        print(f"READY pid={os.getpid()} loop={loop}", flush=True)
        await shutdown.wait()
        if os.environ.get("IGNORE_FIRST_SIGNAL"):
            print("GOT-FIRST-SIGNAL", flush=True)
            await asyncio.get_running_loop().create_future()  # hangs: needs a 2nd
        if os.environ.get("SLOW_SHUTDOWN"):
            # A shutdown that takes a while (flushes...): a repeated signal lands in it.
            try:
                await asyncio.wait_for(asyncio.get_running_loop().create_future(), 2.0)
            except TimeoutError:
                pass
        print("SHUTDOWN-RAN", flush=True)
        return 0

    setup_logging("INFO")
    sys.exit(run(main))
    """
)
READY = r"^READY pid=(?P<pid>\d+) loop=(?P<loop>\w+)$"


def test_run_shuts_down_gracefully_on_sigterm(
    start_process: Callable[..., ManagedProcess],
) -> None:
    proc = start_process(["-c", CHILD_MAIN], name="entry", ready=READY)
    assert proc.groups == {"pid": str(proc.pid), "loop": "uvloop"}
    assert proc.stop() == 0, proc.tail()
    assert not proc.killed
    assert "SHUTDOWN-RAN" in proc.output()
    assert "shutdown requested signal=SIGTERM" in proc.stderr_path.read_text()


def test_run_second_signal_cancels_main(start_process: Callable[..., ManagedProcess]) -> None:
    proc = start_process(
        ["-c", CHILD_MAIN], name="stubborn", ready=READY, env={"IGNORE_FIRST_SIGNAL": "1"}
    )
    proc.send_signal(signal.SIGINT)
    wait_until_sync(lambda: "GOT-FIRST-SIGNAL" in proc.output(), what="first signal handled")
    assert proc.stop() == 128 + signal.SIGINT, proc.tail()  # stop() sends SIGTERM, the 2nd
    assert not proc.killed
    assert "SHUTDOWN-RAN" not in proc.output()


def test_read_with_backup_blocking_falls_back_as_config_manager(tmp_path: Path) -> None:
    from aiorocketmq.runtime.files import read_with_backup_blocking

    path = tmp_path / "topics.json"
    assert read_with_backup_blocking(path, int) is None  # neither file: empty tables
    path.write_text("")
    path.with_name("topics.json.bak").write_text("7")
    assert read_with_backup_blocking(path, int) == 7  # empty main file: the .bak
    path.write_text("garbage")
    assert read_with_backup_blocking(path, int) == 7  # unparsable main file: the .bak
    path.write_text("5")
    assert read_with_backup_blocking(path, int) == 5
    path.with_name("topics.json.bak").write_text("also garbage")
    path.write_text("garbage")
    with pytest.raises(ValueError):
        read_with_backup_blocking(path, int)


def test_run_same_signal_repeated_at_once_counts_once(
    start_process: Callable[..., ManagedProcess],
) -> None:
    """A parent dying with several threads sends its parent-death SIGTERM once per
    thread: two SIGTERMs in a row are one request, so the shutdown still runs."""
    proc = start_process(["-c", CHILD_MAIN], name="twice", ready=READY, env={"SLOW_SHUTDOWN": "1"})
    proc.send_signal(signal.SIGTERM)
    # The second only after the first was handled (pending signals would coalesce).
    wait_until_sync(
        lambda: "shutdown requested" in proc.stderr_path.read_text(), what="first handled"
    )
    proc.send_signal(signal.SIGTERM)
    wait_until_sync(lambda: not proc.running, timeout=10, what="exit after the shutdown")
    assert proc.returncode == 0, proc.tail()
    assert "SHUTDOWN-RAN" in proc.output()


def test_freeze_startup_objects_takes_them_out_of_the_collector() -> None:
    """What start-up made leaves the cyclic collector's reach (gc.freeze), so a full
    collection under load no longer walks every module and class. Run in a child so
    this test process's own collector is left alone."""
    script = textwrap.dedent(
        """
        import gc
        from aiorocketmq.runtime import freeze_startup_objects

        before = gc.get_freeze_count()
        freeze_startup_objects()
        print(before, gc.get_freeze_count())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    before, after = (int(v) for v in done.stdout.split())
    assert before == 0 and after > 1000, done.stdout


def test_announce_ready_prints_and_writes_the_ready_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "ready"
    announce_ready("mqnamesrv ready address=0.0.0.0:9876 pid=7", {READY_FILE_ENV: str(target)})
    assert capsys.readouterr().out == "mqnamesrv ready address=0.0.0.0:9876 pid=7\n"
    assert target.read_text() == "mqnamesrv ready address=0.0.0.0:9876 pid=7\n"
    assert [p.name for p in tmp_path.iterdir()] == ["ready"]  # no temp file left
    announce_ready("again", {})  # no variable: printed only
    assert capsys.readouterr().out == "again\n" and target.read_text().startswith("mqnamesrv")


def test_announce_ready_survives_an_unwritable_ready_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    announce_ready("ready", {READY_FILE_ENV: str(tmp_path / "missing-dir" / "ready")})
    assert capsys.readouterr().out == "ready\n"
