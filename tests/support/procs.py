"""Real child processes for tests: start, wait for the ready line, stop cleanly.

Owns: ``ManagedProcess`` (``sys.executable`` plus arguments; stdout and stderr
go to log files; a caller-given regex marks the machine-readable ready line and
its named groups, e.g. the bound address, become ``groups``) and ``PidRegistry``
(the session's record of started PIDs, so leftovers are killed by PID at the end).

Stopping follows STYLE.md §4.6: SIGTERM, wait with a timeout, SIGKILL by PID if
needed, return the exit code; a clean exit is itself under test.

Must not: read a child's output through a pipe (a full pipe blocks the child;
we tail its log file instead), choose ports, or leave a process unregistered.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from tests.support.wait import wait_until, wait_until_sync

__all__ = ["ManagedProcess", "PidRegistry"]

DEFAULT_READY_TIMEOUT_S = 15.0
DEFAULT_STOP_TIMEOUT_S = 10.0


class PidRegistry:
    """PIDs of children started during the session, killed by PID at its end.

    Register a PID only while its process is known alive, and unregister it
    once reaped: a PID left here after its process exited could be reused.
    """

    def __init__(self) -> None:
        self._children: dict[int, subprocess.Popen[bytes] | None] = {}

    def register(self, pid: int, popen: subprocess.Popen[bytes] | None = None) -> None:
        """Record ``pid`` (with its ``Popen`` if we started it, to reap it)."""
        self._children[pid] = popen

    def unregister(self, pid: int) -> None:
        """Forget ``pid``: its process has exited and was reaped."""
        self._children.pop(pid, None)

    @property
    def pids(self) -> list[int]:
        """The registered PIDs, oldest first."""
        return list(self._children)

    def kill_leftovers(self, timeout_s: float = 5.0) -> list[int]:
        """SIGKILL every registered process still alive and reap our children.

        Returns:
            The PIDs that were still alive and got killed.
        """
        killed: list[int] = []
        for pid, popen in list(self._children.items()):
            if popen is not None and popen.poll() is not None:
                continue  # exited on its own; already reaped by poll()
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(pid)
            if popen is not None:
                popen.wait(timeout_s)
        self._children.clear()
        return killed


class ManagedProcess:
    """One child process: ``sys.executable *args`` with logs and a ready line.

    Example::

        proc = ManagedProcess(["-m", "aiorocketmq.cli.namesrv", "--listen-port", "0"],
                              name="namesrv", log_dir=tmp_path, registry=pid_registry,
                              ready=r"^READY namesrv addr=(?P<addr>\\S+)$")
        proc.start()
        addr = proc.wait_ready()["addr"]
        ...
        assert proc.stop() == 0, proc.tail()
    """

    def __init__(
        self,
        args: Sequence[str],
        *,
        name: str,
        log_dir: Path,
        registry: PidRegistry | None = None,
        ready: str | re.Pattern[str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
    ) -> None:
        """Describe the process; nothing starts until ``start()``.

        Args:
            args: Arguments after ``sys.executable``, e.g. ``["-m", "pkg.mod"]``.
            name: Used for log file names and messages.
            log_dir: Directory for ``<name>.stdout.log`` and ``<name>.stderr.log``.
            registry: The session's ``PidRegistry`` (the ``pid_registry`` fixture).
            ready: Regex searched in each stdout line; its named groups become
                ``groups``. Required by ``wait_ready``.
            env: Variables added to (overriding) the inherited environment.
            cwd: Working directory of the child.
        """
        self.name = name
        self.argv = [sys.executable, *args]
        self.registry = registry
        self.ready = re.compile(ready) if isinstance(ready, str) else ready
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.cwd = cwd
        self.stdout_path, self.stderr_path = _log_paths(Path(log_dir), name)
        self.match: re.Match[str] | None = None
        self.killed = False
        self._popen: subprocess.Popen[bytes] | None = None
        self._read_offset = 0
        self._partial = b""

    # -- starting --------------------------------------------------------------

    def start(self) -> ManagedProcess:
        """Spawn the child (in its own session) and register its PID."""
        if self._popen is not None:
            raise RuntimeError(f"{self.name} already started")
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # a Ctrl-C on pytest does not hit it first
            )
        if self.registry is not None:
            self.registry.register(self._popen.pid, self._popen)
        return self

    @property
    def popen(self) -> subprocess.Popen[bytes]:
        """The ``Popen`` object; raises if not started."""
        if self._popen is None:
            raise RuntimeError(f"{self.name} was not started")
        return self._popen

    @property
    def pid(self) -> int:
        """The child's PID."""
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        """Exit code (negative: killed by that signal), or None while running."""
        return self.popen.poll()

    @property
    def running(self) -> bool:
        """True while the child has not exited."""
        return self._popen is not None and self._popen.poll() is None

    @property
    def groups(self) -> dict[str, str]:
        """Named groups of the ready line; raises if it was not seen yet."""
        if self.match is None:
            raise RuntimeError(f"{self.name} has not printed its ready line")
        return {k: v for k, v in self.match.groupdict().items() if v is not None}

    def wait_ready(self, timeout: float = DEFAULT_READY_TIMEOUT_S) -> dict[str, str]:
        """Block until the ready line appears; return its named groups.

        Raises:
            AssertionError: On timeout, or if the child exits first; the
                message carries the tails of both logs.
        """
        wait_until_sync(
            self._poll_ready, timeout=timeout, what=self._ready_what(), describe=self.tail
        )
        return self.groups

    async def wait_ready_async(
        self,
        timeout: float = DEFAULT_READY_TIMEOUT_S,
    ) -> dict[str, str]:
        """``wait_ready`` for async tests: polls without blocking the loop."""
        await wait_until(
            self._poll_ready, timeout=timeout, what=self._ready_what(), describe=self.tail
        )
        return self.groups

    def _ready_what(self) -> str:
        pattern = self.ready.pattern if self.ready is not None else None
        return f"{self.name} (pid {self.pid}) to print a line matching {pattern!r}"

    def _poll_ready(self) -> bool:
        if self.ready is None:
            raise RuntimeError(f"{self.name}: no ready pattern was given")
        if self.match is not None:
            return True
        exited = self.popen.poll()  # read the code before the file: no lost lines
        lines = self._new_lines()
        if exited is not None and self._partial:
            lines.append(self._partial.decode("utf-8", "replace"))  # no final newline
        for line in lines:
            self.match = self.ready.search(line)
            if self.match is not None:
                return True
        if exited is not None:
            raise AssertionError(
                f"{self.name} exited with code {exited} before its ready line\n{self.tail()}"
            )
        return False

    def _new_lines(self) -> list[str]:
        with self.stdout_path.open("rb") as f:
            f.seek(self._read_offset)
            chunk = f.read()
        self._read_offset += len(chunk)
        *complete, self._partial = (self._partial + chunk).split(b"\n")
        return [raw.decode("utf-8", "replace").rstrip("\r") for raw in complete]

    # -- stopping --------------------------------------------------------------

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the child if it is still running."""
        if self.running:
            self.popen.send_signal(sig)

    def stop(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> int:
        """SIGTERM, wait up to ``timeout``, SIGKILL by PID if needed; return the code.

        Idempotent: returns the exit code of an already exited child.
        """
        popen = self.popen
        if popen.poll() is None:
            popen.send_signal(signal.SIGTERM)
            try:
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_by_pid()
                popen.wait(timeout)
        return self._reaped()

    async def stop_async(
        self,
        timeout: float = DEFAULT_STOP_TIMEOUT_S,
    ) -> int:
        """``stop`` for async tests: waits without blocking the loop."""
        popen = self.popen
        if popen.poll() is None:
            popen.send_signal(signal.SIGTERM)
            try:
                await wait_until(lambda: popen.poll() is not None, timeout=timeout, what="exit")
            except AssertionError:
                self._kill_by_pid()
                popen.wait(timeout)  # SIGKILL cannot be ignored: brief
        return self._reaped()

    def kill(self, timeout: float = DEFAULT_STOP_TIMEOUT_S) -> int:
        """SIGKILL the child now (chaos tests) and return its exit code."""
        if self.popen.poll() is None:
            self._kill_by_pid()
            self.popen.wait(timeout)
        return self._reaped()

    def _kill_by_pid(self) -> None:
        self.killed = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # exited between the check and the kill

    def _reaped(self) -> int:
        code = self.popen.returncode
        assert code is not None
        if self.registry is not None:
            self.registry.unregister(self.pid)
        return code

    # -- diagnostics -----------------------------------------------------------

    def output(self) -> str:
        """Everything the child wrote to stdout so far."""
        return self.stdout_path.read_text("utf-8", "replace")

    def tail(self, lines: int = 30) -> str:
        """The last ``lines`` lines of stdout and stderr, for failure messages."""
        parts = []
        for label, path in (("stdout", self.stdout_path), ("stderr", self.stderr_path)):
            text = path.read_text("utf-8", "replace") if path.exists() else ""
            last = "\n".join(text.splitlines()[-lines:])
            parts.append(f"--- {self.name} {label} ({path}) ---\n{last}")
        return "\n".join(parts)

    def __repr__(self) -> str:
        pid = self._popen.pid if self._popen is not None else None
        return (
            f"<ManagedProcess {self.name} pid={pid} returncode={self.returncode if pid else None}>"
        )

    def __enter__(self) -> ManagedProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._popen is not None:
            self.stop()


def _log_paths(log_dir: Path, name: str) -> tuple[Path, Path]:
    """Fresh ``<name>[-n].stdout.log`` / ``.stderr.log`` paths in ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    stem, n = name, 1
    while True:
        stdout_path = log_dir / f"{stem}.stdout.log"
        try:
            stdout_path.touch(exist_ok=False)  # claim the name now, not at start()
        except FileExistsError:
            n += 1
            stem = f"{name}-{n}"
            continue
        return stdout_path, log_dir / f"{stem}.stderr.log"
