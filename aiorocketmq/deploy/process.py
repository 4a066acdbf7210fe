"""Local node processes: start one, wait for its ready line, signal it by PID.

Owns: spawning ``python -m aiorocketmq.cli.namesrv|broker`` in its own session
(so a terminal's Ctrl-C reaches only the launcher, which stops nodes in order)
with stdout and stderr appended to one log file, the PID file, reading the ready
line from the log, optionally tying a node's life to this process
(``PR_SET_PDEATHSIG``), telling whether a PID is still that node (``/proc`` state and
command line, so a reused PID is not mistaken for it), signalling by PID, waiting
for exit, and picking a free port base on 127.0.0.1.

Must not: know layouts or the remoting protocol (``cluster``, ``probe``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BROKER_READY",
    "NAMESRV_READY",
    "NodeProcess",
    "ProcessError",
    "free_port_base",
    "pid_alive",
]

NAMESRV_READY = re.compile(r"mqnamesrv ready address=(?P<addr>\S+) pid=(?P<pid>\d+)")
BROKER_READY = re.compile(
    r"mqbroker ready address=(?P<addr>\S+) name=(?P<name>\S+) id=(?P<id>\d+) pid=(?P<pid>\d+)"
)
POLL_S = 0.05
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class ProcessError(RuntimeError):
    """A node did not start or did not stop; the message has its log's tail."""


def pid_alive(pid: int, marker: str | None = None) -> bool:
    """Whether ``pid`` runs (not a zombie) and, when ``marker`` is given, has it in
    its command line."""
    proc = Path(f"/proc/{pid}")
    if proc.exists():
        try:
            stat = (proc / "stat").read_text()
            cmdline = (
                (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            )
        except OSError:
            return False
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            return False
        return marker is None or marker in cmdline
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return sys.platform != "linux"  # no /proc entry on Linux means it is gone


@dataclass
class NodeProcess:
    """One node's process files and, when this process started it, its Popen."""

    name: str
    args: Sequence[str]
    log_path: Path
    pid_path: Path
    ready: re.Pattern[str]
    marker: str
    popen: subprocess.Popen[bytes] | None = None
    _log_offset: int = field(default=0, repr=False)

    @property
    def pid(self) -> int | None:
        """The PID from the PID file, or None."""
        try:
            return int(self.pid_path.read_text().strip())
        except (OSError, ValueError):
            return None

    @property
    def running(self) -> bool:
        """Whether the node's process is alive."""
        if self.popen is not None and self.popen.pid == self.pid:
            return self.popen.poll() is None
        pid = self.pid
        return pid is not None and pid_alive(pid, self.marker)

    def spawn(
        self,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        die_with_parent: bool = False,
    ) -> None:
        """Start the process (its ready line is awaited by ``wait_ready``).

        With ``die_with_parent`` (Linux) the node gets SIGTERM when this process
        dies, however it dies: a test run killed mid-way leaves no cluster behind.
        """
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.pid_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        tie = die_with_parent and sys.platform == "linux"
        with self.log_path.open("ab") as out:
            boot = ["-c", _TIED_BOOT, str(os.getpid())] if tie else []

            def popen() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    [sys.executable, *boot, *self.args],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env={**os.environ, **(env or {})},
                    start_new_session=True,
                )

            # The parent-death signal follows the *thread* that forked: fork from
            # one thread that lives as long as this process.
            self.popen = _spawner().submit(popen).result() if tie else popen()
        tmp = self.pid_path.with_suffix(".tmp")
        tmp.write_text(f"{self.popen.pid}\n")
        tmp.replace(self.pid_path)

    def poll_ready(self) -> dict[str, str] | None:
        """The ready line's fields once printed; raises if the process exited first."""
        exited = self.popen.poll() if self.popen is not None else None
        with self.log_path.open("rb") as f:
            f.seek(self._log_offset)
            text = f.read().decode("utf-8", "replace")
        match = self.ready.search(text)
        if match is not None:
            return match.groupdict()
        if exited is not None or (self.popen is None and not self.running):
            raise ProcessError(
                f"{self.name} exited (code {exited}) before it was ready\n" + self.tail()
            )
        return None

    def wait_ready(self, timeout: float) -> dict[str, str]:
        """Block until the ready line appears.

        Raises:
            ProcessError: Exited first, or not ready within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        while True:
            fields = self.poll_ready()
            if fields is not None:
                return fields
            if time.monotonic() > deadline:
                raise ProcessError(f"{self.name} not ready after {timeout:.0f} s\n" + self.tail())
            time.sleep(POLL_S)

    def signal(self, sig: int) -> bool:
        """Send ``sig`` by PID if the node runs; whether it was sent."""
        pid = self.pid
        if pid is None or not self.running:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        return True

    def wait_gone(self, timeout: float) -> bool:
        """Wait until the process has exited (reaping it when it is our child)."""
        deadline = time.monotonic() + timeout
        while self.running:
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_S)
        return True

    def exit_code(self) -> int | None:
        """The exit code when this process started the node and it has exited."""
        return self.popen.poll() if self.popen is not None else None

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL by PID and wait until it is gone."""
        if self.signal(signal.SIGKILL):
            self.wait_gone(timeout)

    def terminate(self, timeout: float = 30.0) -> None:
        """SIGTERM, wait, then SIGKILL if it is still there."""
        if self.signal(signal.SIGTERM) and not self.wait_gone(timeout):
            self.kill()

    def tail(self, lines: int = 25) -> str:
        """The last lines of the node's log, for error messages."""
        try:
            text = self.log_path.read_text("utf-8", "replace")
        except OSError:
            return f"--- {self.log_path} (missing) ---"
        last = "\n".join(text.splitlines()[-lines:])
        return f"--- {self.log_path} ---\n{last}"


_SPAWNER: list[concurrent.futures.ThreadPoolExecutor] = []

# Run in the child before the node's module: ask for SIGTERM when the parent dies
# (it lasts through the runpy below), and give up if the parent is already gone.
_TIED_BOOT = f"""
import ctypes, os, runpy, signal, sys
parent = int(sys.argv[1])
ctypes.CDLL(None, use_errno=True).prctl({PR_SET_PDEATHSIG}, signal.SIGTERM)
if os.getppid() != parent:
    sys.exit(1)
module, sys.argv = sys.argv[3], [sys.argv[3], *sys.argv[4:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def _spawner() -> concurrent.futures.ThreadPoolExecutor:
    """The process-wide thread that forks tied nodes (lives until interpreter exit)."""
    if not _SPAWNER:
        _SPAWNER.append(concurrent.futures.ThreadPoolExecutor(1, "aiorocketmq-spawner"))
    return _SPAWNER[0]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_base(
    offsets: Iterable[int], low: int = 20000, high: int = 30000, attempts: int = 200
) -> int:
    """A base B such that every ``B + offset`` is free on 127.0.0.1 now.

    The default range stays below Linux's ephemeral ports (32768+), so client
    sockets of other programs do not take the ports between the check and the bind.

    Raises:
        ProcessError: No such base found.
    """
    wanted = sorted(set(offsets))
    span = wanted[-1] if wanted else 0
    rng = random.Random()
    for _ in range(attempts):
        base = rng.randrange(low, high - span)
        if all(_port_free(base + off) for off in wanted):
            return base
    raise ProcessError(f"no free port base in [{low}, {high}) for offsets {wanted}")
