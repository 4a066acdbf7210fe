"""``mqshutdown namesrv|broker``: stop this host's name servers or brokers, as RocketMQ's script.

Usage::

    mqshutdown namesrv                 # every mqnamesrv of this user on this host
    mqshutdown broker                  # every mqbroker, waiting until each has exited
    mqshutdown broker --match conf/broker-a.properties   # only those whose command line has it

Java's ``bin/mqshutdown`` finds the JVMs running ``NamesrvStartup`` or
``BrokerStartup`` with ``ps`` and sends them SIGTERM, which stops them cleanly (a
broker flushes and writes its checkpoint). This does the same for ``mqnamesrv`` /
``mqbroker`` and ``python -m aiorocketmq.cli.namesrv`` / ``.broker`` processes of
the calling user, then waits until each has exited (``--timeout``, 60 s; 0: do not
wait). ``--match`` (aiorocketmq) keeps only command lines containing the text, so one
of several clusters on a host can be stopped alone.

Output follows the script: ``The mqbroker(4242) is running...`` then ``Send shutdown
request to mqbroker(4242) OK``; none running prints ``No mqbroker running.`` (exit 1,
where the script exits -9). Exit 1 too when one did not exit within the timeout.

Owns: finding the processes (``/proc`` on Linux, ``ps`` elsewhere), signalling them,
waiting for their exit (a pidfd where the kernel has one, so the wait is an event).

Must not: stop processes of other users or other programs, or run a server itself.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

__all__ = ["build_parser", "find_processes", "main"]

TARGETS: Final = {
    "namesrv": ("mqnamesrv", "aiorocketmq.cli.namesrv"),
    "broker": ("mqbroker", "aiorocketmq.cli.broker"),
}
"""Role -> (console script, module), the two ways our servers are started."""

EXIT_FAILED: Final = 1


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``mqshutdown``."""
    parser = argparse.ArgumentParser(
        prog="mqshutdown", description="Stop this host's name servers or brokers (SIGTERM)."
    )
    parser.add_argument("role", choices=sorted(TARGETS), help="which servers to stop")
    parser.add_argument(
        "--match", metavar="TEXT", help="only command lines containing TEXT (aiorocketmq)"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="S",
        help="wait up to S seconds for each to exit (0: do not wait; default 60)",
    )  # fmt: skip
    return parser


def is_server(argv: Sequence[str], role: str) -> bool:
    """Whether ``argv`` runs the ``role`` server (script path, or ``-m`` module)."""
    script, module = TARGETS[role]
    for i, word in enumerate(argv[:3]):  # the interpreter, maybe -m, then the program
        if Path(word).name == script:
            return True
        if word == "-m" and i + 1 < len(argv) and argv[i + 1] == module:
            return True
    return False


def _proc_command_lines() -> Iterator[tuple[int, list[str]]]:
    uid = os.getuid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if raw:
            yield int(entry.name), raw.rstrip(b"\0").decode(errors="replace").split("\0")


def _ps_command_lines() -> Iterator[tuple[int, list[str]]]:
    out = subprocess.run(
        ["ps", "-x", "-o", "pid=", "-o", "command="], capture_output=True, text=True, check=True
    ).stdout
    for line in out.splitlines():
        pid, _, command = line.strip().partition(" ")
        if pid.isdigit():
            yield int(pid), command.split()


def find_processes(role: str, match: str | None = None) -> list[int]:
    """PIDs of this user's ``role`` servers (not this process), optionally matching text."""
    lines = _proc_command_lines() if Path("/proc/self").exists() else _ps_command_lines()
    found = []
    for pid, argv in lines:
        if pid == os.getpid() or not is_server(argv, role):
            continue
        if match is None or match in " ".join(argv):
            found.append(pid)
    return sorted(found)


def _exited(pid: int) -> bool:
    """Gone, or a zombie waiting for its parent (it has exited)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[0] == "Z"
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def wait_exited(pid: int, timeout_s: float) -> bool:
    """Wait until ``pid`` has exited; False when it still runs after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            fd = pidfd_open(pid)
        except ProcessLookupError:
            return True
        except OSError:
            fd = -1
        if fd >= 0:
            try:  # readable once the process has exited: no polling
                readable, _, _ = select.select([fd], [], [], max(0.0, timeout_s))
                return bool(readable)
            finally:
                os.close(fd)
    while not _exited(pid):  # no pidfd here: look again every 100 ms
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mqshutdown``; returns the exit code."""
    args = build_parser().parse_args(argv)
    name = TARGETS[args.role][0]
    pids = find_processes(args.role, args.match)
    if not pids:
        print(f"No {name} running.")
        return EXIT_FAILED
    code = 0
    for pid in pids:
        print(f"The {name}({pid}) is running...")
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue  # exited meanwhile
        except PermissionError as exc:
            print(f"Send shutdown request to {name}({pid}) failed: {exc}", file=sys.stderr)
            code = EXIT_FAILED
            continue
        print(f"Send shutdown request to {name}({pid}) OK")
    if args.timeout > 0:
        for pid in pids:
            if not wait_exited(pid, args.timeout):
                print(f"{name}({pid}) still runs after {args.timeout:g} s", file=sys.stderr)
                code = EXIT_FAILED
    return code


if __name__ == "__main__":
    sys.exit(main())
