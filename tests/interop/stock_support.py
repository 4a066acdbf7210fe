"""Shared pieces of the stock-client tests against a real ``mqnamesrv`` + ``mqbroker``.

Owns: launching the client scripts (``cpp_client.py`` through ``sys.executable``,
the ali-ons scripts through ``node``) as managed processes with ``HOME`` in a
temporary directory, waiting for their result line and a clean exit, the keys and
tags the scripts give message ``i`` (mirroring them), and reading the records the
consumers write.

Must not: judge results (each test asserts its own), or start brokers (see
``tests/support/cluster.py``).
"""

from __future__ import annotations

import dataclasses
import shutil
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

__all__ = [
    "CONSUMED",
    "CPP_SCRIPT",
    "NODE_DIR",
    "PRODUCED",
    "PULLED",
    "TAGS",
    "Received",
    "Sent",
    "StartProcess",
    "assert_exactly_once",
    "cpp_log_bytes",
    "expected_messages",
    "finish",
    "key_counts",
    "node_or_fail",
    "read_pulled",
    "read_received",
    "read_send_results",
    "start_cpp",
    "start_node",
]

StartProcess = Callable[..., ManagedProcess]

REPO_ROOT = Path(__file__).resolve().parents[2]
CPP_SCRIPT = "tests/interop/cpp_client.py"
NODE_DIR = REPO_ROOT / "tests" / "interop" / "node"
TAGS = ("TagA", "TagB", "TagC")

PRODUCED = r"PRODUCED .*count=(?P<count>\d+) errors=(?P<errors>\d+) seconds=(?P<seconds>[\d.]+)"
CONSUMED = (
    r"CONSUMED count=(?P<count>\d+) distinct=(?P<distinct>\d+) seconds=(?P<seconds>[\d.]+)"
    r"(?: span=\S+)?(?: errors=(?P<errors>\d+))?"
)
PULLED = r"PULLED count=(?P<count>\d+) seconds=(?P<seconds>[\d.]+)"


@dataclass(frozen=True)
class Sent:
    """What a producer script sent for message ``i`` (mirrors the scripts)."""

    key: str
    tag: str
    shard: int
    seq: int


def expected_messages(n: int, prefix: str, shards: int = 16) -> list[Sent]:
    """Messages ``0..n-1`` as ``cpp_client.py produce`` and ``alions_produce.js`` send them."""
    return [Sent(f"{prefix}{i:06d}", TAGS[i % 3], i % shards, i // shards) for i in range(n)]


@dataclass(frozen=True)
class Received:
    """One line a consumer script wrote."""

    key: str
    tag: str
    queue_id: int
    queue_offset: int
    body: str = ""
    msg_id: str = ""
    reconsume_times: int = 0
    topic: str = ""


def read_received(path: Path) -> list[Received]:
    """Push-consumer lines: ``key tag queueId queueOffset [reconsumeTimes topic]``
    (ali-ons writes the last two); a line still being written (no newline yet) is
    left out, so a running consumer's file can be read."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text("utf-8").split("\n")[:-1]:
        key, tag, queue_id, offset, *more = line.split(" ")
        record = Received(key, tag, int(queue_id), int(offset))
        if more:
            reconsume_times, topic = more
            record = dataclasses.replace(record, reconsume_times=int(reconsume_times), topic=topic)
        out.append(record)
    return out


def read_pulled(path: Path) -> list[Received]:
    """Pull-consumer lines: ``queueId queueOffset key tag msgId body-head``, in pull order."""
    out = []
    for line in path.read_text("utf-8").splitlines():
        queue_id, offset, key, tag, msg_id, body = line.split(" ", 5)
        out.append(Received(key, tag, int(queue_id), int(offset), body, msg_id))
    return out


def read_send_results(path: Path) -> dict[str, tuple[int, str]]:
    """Producer ``--results`` lines: key -> (queueOffset, msgId) from its SendResult."""
    out = {}
    for line in path.read_text("utf-8").splitlines():
        key, offset, msg_id = line.split(" ")
        out[key] = (int(offset), msg_id)
    return out


def key_counts(records: Sequence[Received]) -> Counter[str]:
    """How often each key arrived."""
    return Counter(r.key for r in records)


def assert_exactly_once(records: Sequence[Received], expected: Sequence[Sent]) -> None:
    """Every expected key arrived once; nothing else did; each with the tag it was sent with."""
    counts = key_counts(records)
    want = {m.key: m.tag for m in expected}
    missing = sorted(set(want) - set(counts))
    foreign = sorted(set(counts) - set(want))
    twice = sorted(k for k, n in counts.items() if n > 1)
    assert not missing, f"{len(missing)} missing, e.g. {missing[:5]}"
    assert not foreign, f"{len(foreign)} foreign, e.g. {foreign[:5]}"
    assert not twice, f"{len(twice)} delivered more than once, e.g. {twice[:5]}"
    wrong_tag = [r for r in records if want[r.key] != r.tag]
    assert not wrong_tag, f"tags differ from what was sent: {wrong_tag[:5]}"


def start_cpp(
    start_process: StartProcess, home: Path, name: str, args: Sequence[str], ready: str
) -> ManagedProcess:
    """``cpp_client.py *args`` in its own process, logs under ``home``."""
    home.mkdir(parents=True, exist_ok=True)
    return start_process(
        [CPP_SCRIPT, *args], name=name, ready=ready, wait=False, env={"HOME": str(home)}
    )


def node_or_fail() -> str:
    """The ``node`` binary; skip without node, fail when ali-ons is not installed."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (NODE_DIR / "node_modules" / "ali-ons").is_dir():
        pytest.fail(
            "ali-ons is not installed: run `make test` (it runs "
            "`npm install --prefix tests/interop/node`)",
            pytrace=False,
        )
    return node


def start_node(
    start_process: StartProcess,
    home: Path,
    name: str,
    script: str,
    args: Sequence[str],
    ready: str,
    env: Mapping[str, str] | None = None,
) -> ManagedProcess:
    """``node tests/interop/node/<script> *args`` (through ``sys.executable``, which
    ``start_process`` runs, replaced by node with ``os.execv``); ``env`` is added to
    the process environment (e.g. ``ONS_ACCESS_KEY`` / ``ONS_SECRET_KEY``)."""
    node = node_or_fail()
    home.mkdir(parents=True, exist_ok=True)
    launcher = f"import os, sys; os.execv({node!r}, [{node!r}, *sys.argv[1:]])"
    return start_process(
        ["-c", launcher, str(NODE_DIR / script), *args],
        name=name,
        ready=ready,
        wait=False,
        env={"HOME": str(home), **(env or {})},
    )


async def finish(proc: ManagedProcess, limit_s: float) -> dict[str, str]:
    """Wait for the result line and a clean exit; return the line's fields."""
    groups = await proc.wait_ready_async(timeout=limit_s)
    await wait_until(lambda: not proc.running, timeout=limit_s, what=f"{proc.name} exit")
    assert proc.returncode == 0, proc.tail()
    return groups


def cpp_log_bytes(home: Path) -> int:
    """Bytes the C++ client wrote under ``home`` (its logs; capped by the scripts)."""
    return sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
