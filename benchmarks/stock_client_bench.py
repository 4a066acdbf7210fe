"""Stock C++ client through our broker: produce and consume msgs/s for 1 KiB messages.

Setup: ``mqnamesrv`` and ``mqbroker`` run as child processes (the real CLIs; the
store in a temporary directory, ASYNC_FLUSH, 128 MiB CommitLog files). The stock
C++ client (PyPI ``rocketmq`` 0.4.4) runs through ``tests/interop/cpp_client.py``,
each role in its own process, with ``HOME`` in the temporary directory:

1. *produce sync x1*: ``--messages`` (50,000) 1 KiB messages with ``send_sync``
   from one process: one request in flight (the binding has no pipelining), so
   broker and client take turns and neither saturates; topic auto-created
   (4 queues, the client's default).
2. *produce sync xK*: the same number over ``--producers`` (4) processes at once.
3. *produce oneway x1*: ``send_oneway`` from one process; also timed until the
   last message is in the store (the client returns before that).
4. *consume (push) x1*: a stock PushConsumer (new group, ``*``, ``--threads``
   callback threads) reads the first topic from offset 0 until it has every key.
   Its rate is set by the client: its listener here is Python (a line per message
   to a file, four C++ threads sharing the GIL; each keeps its Python thread state,
   see ``cpp_client._keep_thread_state``), and the C++ core stops pulling a
   queue for 1 s whenever more than 1,000 of its messages wait for the listener.
   A second line gives the rate without those stalls (gaps of 0.5 s or more
   between deliveries), and how many there were.

Rates come from the clients' own clocks (send loop start to end, over all
producers; first to last message received), so process start-up and rebalancing
are not counted. For each phase the CPU time of the broker (``/proc/<pid>/stat``)
and of the client processes (their rusage, start-up included) over the clients'
lifetime is shown in cores (1.00 = one core busy), with what other processes on
the machine used meanwhile (``/proc/stat``); a side at >= 0.85 (clients: per
process) is named as the one that saturated, and a machine whose cores were all
>= 85 % busy is said so (this machine has 2 cores, shared with other work).
Afterwards GET_MAX_OFFSET over each topic's queues confirms every message was
stored.

Run: ``python benchmarks/stock_client_bench.py [--messages 50000] [--producers 4]
[--threads 4]``.
Needs x86_64 Linux (the ``rocketmq`` wheel). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand

REPO_ROOT = Path(__file__).resolve().parent.parent
CPP_SCRIPT = REPO_ROOT / "tests" / "interop" / "cpp_client.py"
CLK_TCK = os.sysconf("SC_CLK_TCK")
QUEUES = 4  # the C++ producer's defaultTopicQueueNums for auto-created topics
BODY_BYTES = 1024
READY_TIMEOUT_S = 30.0


@dataclass
class Server:
    """A CLI child process and the address from its ready line."""

    proc: subprocess.Popen[bytes]
    addr: str

    def cpu_s(self) -> float:
        """User + system CPU seconds so far."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def stop(self) -> int:
        """SIGTERM, wait; the exit code."""
        self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def start_server(args: list[str], ready: str, log: Path, env: dict[str, str]) -> Server:
    """Start ``python -m <args>``; wait for the ready line in its stdout log."""
    out = log.with_suffix(".out")
    with out.open("wb") as stdout, log.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", *args], stdout=stdout, stderr=stderr, env=env
        )
    deadline = time.monotonic() + READY_TIMEOUT_S
    pattern = re.compile(ready)
    while time.monotonic() < deadline:
        match = pattern.search(out.read_text("utf-8", "replace"))
        if match:
            return Server(proc, match["addr"])
        if proc.poll() is not None:
            break
        time.sleep(0.05)  # a benchmark's start-up poll, not a test
    proc.kill()
    raise RuntimeError(f"{args[0]} did not start:\n{log.read_text('utf-8', 'replace')[-2000:]}")


@dataclass
class ClientRun:
    """Client processes' result lines and resource use (CPU summed over them)."""

    fields: list[dict[str, str]]
    wall_s: float
    client_cpu_s: float
    broker_cpu_s: float
    machine_cpu_s: float

    def span_s(self) -> float:
        """First send start to last send end, over producers (``started``/``seconds``)."""
        starts = [float(f["started"]) for f in self.fields]
        ends = [float(f["started"]) + float(f["seconds"]) for f in self.fields]
        return max(ends) - min(starts)


def run_clients(
    arg_lists: list[list[str]], broker: Server, env: dict[str, str], result: str
) -> ClientRun:
    """Run ``cpp_client.py *args`` for each argument list at once, to completion,
    measuring the broker's CPU and the clients' (their rusage)."""
    b0, m0, w0 = broker.cpu_s(), machine_busy_s(), time.perf_counter()
    procs = [
        subprocess.Popen(
            [sys.executable, str(CPP_SCRIPT), *args], stdout=subprocess.PIPE, text=True, env=env
        )
        for args in arg_lists
    ]
    fields, client_cpu = [], 0.0
    for proc in procs:
        stdout = proc.stdout.read() if proc.stdout is not None else ""
        _pid, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        client_cpu += usage.ru_utime + usage.ru_stime
        match = re.search(result, stdout)
        if proc.returncode != 0 or match is None:
            raise RuntimeError(f"client failed ({proc.returncode}): {stdout[-2000:]}")
        fields.append(dict(re.findall(r"(\w+)=(\S+)", match.group(0))))
    wall = time.perf_counter() - w0
    return ClientRun(fields, wall, client_cpu, broker.cpu_s() - b0, machine_busy_s() - m0)


def machine_busy_s() -> float:
    """CPU seconds all cores spent busy so far (``/proc/stat``: all but idle, iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK


SATURATED_SHARE = 0.85


def report(name: str, count: int, seconds: float, run: ClientRun) -> None:
    """One figure line: rate, CPU shares, which side saturated (if either did)."""
    broker_share = run.broker_cpu_s / run.wall_s
    client_share = run.client_cpu_s / run.wall_s
    machine_share = run.machine_cpu_s / run.wall_s
    others = max(0.0, machine_share - broker_share - client_share)
    per_client = client_share / len(run.fields)
    busier = "broker" if broker_share >= client_share else "clients"
    if broker_share >= SATURATED_SHARE:
        verdict = "broker saturated"
    elif per_client >= SATURATED_SHARE:
        verdict = "client saturated"
    elif machine_share >= SATURATED_SHARE * (os.cpu_count() or 1):
        verdict = f"all cores busy, other processes included ({busier} busier)"
    else:
        # E.g. one sync client: one request in flight, broker and client take turns.
        verdict = f"neither saturated ({busier} busier)"
    print(
        f"{name:<22} {count:>7} msgs in {seconds:7.2f} s = {count / seconds:>9,.0f} msgs/s"
        f" | CPU over {run.wall_s:5.1f} s, in cores: broker {broker_share:.2f}, clients"
        f" {client_share:.2f}, other processes {others:.2f} -> {verdict}"
    )


async def stored(broker_addr: str, topic: str) -> int:
    """Messages stored in ``topic`` (GET_MAX_OFFSET summed over its queues)."""
    client = RemotingClient()
    total = 0
    try:
        for queue_id in range(QUEUES):
            fields = {"topic": topic, "queueId": str(queue_id)}
            request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, fields)
            reply = await client.invoke(broker_addr, request, 5000)
            if reply.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"GET_MAX_OFFSET {topic}/{queue_id}: {reply.remark}")
            total += int(reply.ext_fields["offset"])
    finally:
        await client.close()
    return total


def wait_stored(broker_addr: str, topic: str, count: int) -> float:
    """Poll until ``topic`` holds ``count`` messages; the wall-clock time it did."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if uvloop.run(stored(broker_addr, topic)) >= count:
            return time.time()
        time.sleep(0.01)  # a benchmark's poll, not a test
    raise RuntimeError(f"{topic}: fewer than {count} messages stored after 60 s")


def broker_conf(root: Path, namesrv: str) -> Path:
    """The broker's properties file (RocketMQ names)."""
    conf = root / "broker.properties"
    conf.write_text(
        "\n".join(
            [
                "brokerClusterName=DefaultCluster",
                "brokerName=broker-bench",
                "brokerId=0",
                "brokerRole=ASYNC_MASTER",
                "flushDiskType=ASYNC_FLUSH",
                "listenPort=0",
                "brokerIP1=127.0.0.1",
                f"storePathRootDir={root / 'store'}",
                f"mappedFileSizeCommitLog={128 * 1024 * 1024}",
                f"namesrvAddr={namesrv}",
                "",
            ]
        ),
        "utf-8",
    )
    return conf


def bench(root: Path, messages: int, args: Any) -> None:
    """Start the servers, run the three phases, print the figures."""
    env = {**os.environ, "HOME": str(root), "PYTHONUNBUFFERED": "1"}
    namesrv = start_server(
        ["aiorocketmq.cli.namesrv", "--listenPort", "0", "--bindAddress", "127.0.0.1"],
        r"mqnamesrv ready address=(?P<addr>\S+)",
        root / "namesrv.log",
        env,
    )
    broker = None
    try:
        broker = start_server(
            ["aiorocketmq.cli.broker", "-c", str(broker_conf(root, namesrv.addr))],
            r"mqbroker ready address=(?P<addr>\S+)",
            root / "broker.log",
            env,
        )
        phases(root, namesrv.addr, broker, env, messages, args)
    finally:
        codes = [s.stop() for s in (broker, namesrv) if s is not None]
        print(f"servers stopped, exit codes {codes}")


def produce(
    namesrv: str, broker: Server, env: dict[str, str], mode: str, topic: str, messages: int, k: int
) -> ClientRun:
    """``k`` producer processes sending ``messages`` in all; print the figure line."""
    each = messages // k
    body = ["--body-size", str(BODY_BYTES)]
    arg_lists = [
        ["produce", namesrv, topic, mode, str(each), "--prefix", f"p{i}-", *body] for i in range(k)
    ]
    result = r"PRODUCED \S+ count=\d+ errors=\d+ seconds=\S+ started=\S+"
    run = run_clients(arg_lists, broker, env, result)
    errors = sum(int(f["errors"]) for f in run.fields)
    if errors:
        raise RuntimeError(f"{mode}: {errors} send errors")
    report(f"produce {mode} x{k}", each * k, run.span_s(), run)
    return run


def phases(
    root: Path, namesrv: str, broker: Server, env: dict[str, str], messages: int, args: Any
) -> None:
    """Produce sync (1 and ``--producers`` processes), oneway, consume; a line each."""
    produce(namesrv, broker, env, "sync", "BenchSync", messages, 1)
    produce(namesrv, broker, env, "sync", "BenchSyncK", messages, args.producers)
    run = produce(namesrv, broker, env, "oneway", "BenchOneway", messages, 1)
    # The oneway client returns before the broker has stored everything: also time
    # until every message is in the store.
    span = wait_stored(broker.addr, "BenchOneway", messages) - float(run.fields[0]["started"])
    print(
        f"{'  oneway, all stored':<22} {messages:>7} msgs in {span:7.2f} s = "
        f"{messages / span:>9,.0f} msgs/s (send start to last message stored)"
    )
    n = str(messages)
    push = ["push", namesrv, "BenchSync", "GID_bench", "*", n, "120", str(root / "push.txt")]
    push += ["--threads", str(args.threads), "--linger-s", "0"]
    result = r"CONSUMED count=\d+ distinct=\d+ seconds=\S+ span=\S+ stalls=\d+ stalled=\S+"
    run = run_clients([push], broker, env, result)
    fields = run.fields[0]
    if fields["distinct"] != n:
        raise RuntimeError(f"consumed {fields['distinct']} distinct keys of {n}")
    span, stalled = float(fields["span"]), float(fields["stalled"])
    report("consume (push) x1", messages, span, run)
    # The client's own flow control, not the broker: see cpp_client.STALL_S.
    print(
        f"{'  without its stalls':<22} {messages:>7} msgs in {span - stalled:7.2f} s = "
        f"{messages / max(span - stalled, 1e-9):>9,.0f} msgs/s (deliveries paused "
        f"{fields['stalls']} times for 0.5 s or more, {stalled:.2f} s in all: the client's "
        "own flow control)"
    )
    for topic in ("BenchSync", "BenchSyncK", "BenchOneway"):
        print(f"stored in {topic}: {uvloop.run(stored(broker.addr, topic))} messages")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--threads", type=int, default=4, help="push consumer callback threads")
    parser.add_argument("--producers", type=int, default=4, help="sync producer processes")
    args = parser.parse_args()
    print(
        f"stock C++ client (rocketmq 0.4.4) -> mqbroker; {args.messages} x {BODY_BYTES} B, "
        f"{os.cpu_count()} CPUs, ASYNC_FLUSH, 128 MiB CommitLog files; load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="stock-bench-") as tmp:
        bench(Path(tmp), args.messages, args)


if __name__ == "__main__":
    main()
