"""Acknowledged SYNC_FLUSH puts survive SIGKILL at random moments (issue 3).

The child (``store_crash_child.py``) puts with SYNC_FLUSH from 16 writers and
prints each acknowledgement; the parent SIGKILLs it after a random number of them,
20 times over one store directory. Every restart is an abnormal recovery (the
abort file stays), and the restarted child first proves that every message
acknowledged so far is readable with its exact body, that no partial record is
visible in the CommitLog, and that the ConsumeQueues agree with it.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("store_crash_child.py")
ROUNDS = 20


async def _run_round(root: Path, ledger: Path, kill_after_acks: int) -> tuple[int, list[list[int]]]:
    """One child run: returns (verified count, acknowledgements of this run)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CHILD), str(root), str(ledger),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        first = await asyncio.wait_for(proc.stdout.readline(), 60)
        text = first.decode().strip()
        if not text.startswith("VERIFIED "):
            err = await asyncio.wait_for(proc.stderr.read(), 10)
            pytest.fail(f"child did not verify: {text!r}\n{err.decode()[-3000:]}")
        acks: list[list[int]] = []
        while len(acks) < kill_after_acks:
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line, "child exited before it was killed"
            acks.append([int(x) for x in line.split()[1:]])
        # The crash: no flush, no shutdown hook, the abort file stays.
        os.kill(proc.pid, signal.SIGKILL)
        # Acknowledgements already written before the kill count too.
        rest = await asyncio.wait_for(proc.stdout.read(), 30)
        acks += [[int(x) for x in ln.split()[1:]] for ln in rest.decode().splitlines()
                 if ln.startswith("ACK ")]  # fmt: skip
        assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL
        return int(text.split()[1]), acks
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.chaos
@pytest.mark.timeout(600)
async def test_acknowledged_messages_survive_sigkill(tmp_path: Path) -> None:
    root, ledger_path = tmp_path / "store", tmp_path / "ledger.json"
    rng = random.Random(20261122)
    ledger: list[list[int]] = []
    for round_no in range(ROUNDS):
        verified, acks = await _run_round(root, ledger_path, rng.randint(1, 400))
        assert verified == len(ledger), f"round {round_no} verified {verified}/{len(ledger)}"
        assert (root / "abort").exists(), "a killed store must leave its abort file"
        ledger += acks
        ledger_path.write_text(json.dumps(ledger))
    # A last start checks the 20th run's acknowledgements too.
    verified, _ = await _run_round(root, ledger_path, 1)
    assert verified == len(ledger) > ROUNDS
    seqs = [entry[0] for entry in ledger]
    assert len(seqs) == len(set(seqs)), "a sequence number was acknowledged twice"
