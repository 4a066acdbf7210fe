"""A disk that fills suddenly: the broker stays up, refuses with figures, and heals.

Another process takes every free byte of the store's file system (a small tmpfs, then
a small ext4 loop mount, both made and removed here) at a random moment while a
producer sends and a consumer reads. Each of ten rounds per file system checks that:

* the broker process lives on (before mapped files were backed, the first write into
  an unbacked page of a ConsumeQueue or IndexFile killed it with SIGBUS);
* sends are refused with CODE 14 and RocketMQ's ``[CL: .. CQ: .. INDEX: ..]`` figures;
* once the filler is removed, sends are accepted again without a restart;
* every acknowledged message is served by pulls.

Root only (it mounts); skipped with the reason elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from aiorocketmq.client.config import ProducerConfig
from aiorocketmq.client.errors import MQBrokerError, MQClientError
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus, SendStatus
from aiorocketmq.common.message import Message
from aiorocketmq.remoting.codes import ResponseCode
from tests.chaos.workload import client_config
from tests.support.cluster import create_topic, start_broker, start_namesrv, wait_route
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs and an ext4 loop device"),
]

StartProcess = Callable[..., ManagedProcess]
TOPIC = "DiskFullTopic"
ROUNDS = 10
FS_MB = 48
BODY = b"d" * 1024

#: Files small enough that every round crosses CommitLog, ConsumeQueue and index files.
STORE = {
    "mappedFileSizeCommitLog": 1024 * 1024,
    "mappedFileSizeConsumeQueue": 2_000 * 20,
    "maxHashSlotNum": 512,
    "maxIndexNum": 2_048,
    "diskMaxUsedSpaceRatio": 99,
}

# A child that takes every free byte of a file system, fallocate first (instant),
# then smaller and smaller pieces until nothing is left.
FILLER = """
import os, sys
path = sys.argv[1]
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
st = os.statvfs(path)
size, at = st.f_bavail * st.f_frsize, 0
while size >= 4096:
    try:
        os.posix_fallocate(fd, at, size)
        at += size
    except OSError:
        size //= 2
os.close(fd)
"""


@contextlib.contextmanager
def small_fs(kind: str, where: Path) -> Iterator[Path]:
    """Mount a ``FS_MB`` MiB tmpfs or ext4 loop file system; unmount and clean up."""
    mount = where / f"{kind}-mnt"
    mount.mkdir()
    image = where / f"{kind}.img"
    if kind == "tmpfs":
        command = ["mount", "-t", "tmpfs", "-o", f"size={FS_MB}m", "tmpfs", str(mount)]
    else:
        with image.open("wb") as f:
            f.truncate(FS_MB * 1024 * 1024)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
        command = ["mount", "-o", "loop", str(image), str(mount)]
    made = subprocess.run(command, capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount {kind}: {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        image.unlink(missing_ok=True)


def broker_error(exc: BaseException) -> MQBrokerError | None:
    """The broker's answer behind a client error, if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, MQBrokerError):
            return seen
        seen = getattr(seen, "last", None) or seen.__cause__
    return None


class Sender:
    """Sync sends, one at a time; keys of acknowledged messages and the refusals."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.acked: set[str] = set()
        self.refusals: list[MQBrokerError] = []
        self._n = 0

    async def until_acked(self, count: int) -> bool:
        """One more send unless ``count`` messages are acknowledged; whether they are."""
        if len(self.acked) < count:
            await self.send()
        return len(self.acked) >= count

    async def until_refused(self, seen: int) -> bool:
        """One more send; whether more than ``seen`` refusals arrived."""
        if len(self.refusals) <= seen:
            await self.send()
        return len(self.refusals) > seen

    async def send(self) -> bool:
        """One send; True when acknowledged (SEND_OK)."""
        self._n += 1
        msg = Message(TOPIC, BODY, properties={"KEYS": f"k{self._n}"})
        try:
            result = await self.producer.send(msg)
        except MQClientError as exc:
            answer = broker_error(exc)
            if answer is None:
                raise
            self.refusals.append(answer)
            return False
        if result.status is not SendStatus.SEND_OK:
            return False
        self.acked.add(f"k{self._n}")
        return True


async def readable_keys(consumer: PullConsumer) -> set[str]:
    """Every key stored in the topic, pulled from offset 0 of each queue."""
    keys: set[str] = set()
    for mq in await consumer.fetch_subscribe_message_queues(TOPIC):
        offset = 0
        while True:
            result = await consumer.pull(mq, "*", offset, 256)
            if result.status is not PullStatus.FOUND:
                break
            keys.update(k for m in result.msg_found_list for k in m.keys)
            offset = result.next_begin_offset
    return keys


async def rounds_on(start_process: StartProcess, tmp_path: Path, store: Path) -> None:
    """Start a broker on ``store``; fill and free its file system ``ROUNDS`` times."""
    _ns_proc, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(
        start_process, tmp_path, namesrv, storePathRootDir=str(store), **STORE
    )
    await create_topic(broker.addr, TOPIC)
    await wait_route(namesrv, TOPIC)
    producer = Producer(
        "PG_disk",
        config=ProducerConfig(retry_times_when_send_failed=0, send_msg_timeout=10_000),
        client_config=client_config(namesrv, "disk-producer"),
    )
    consumer = PullConsumer("CG_disk", client_config=client_config(namesrv, "disk-consumer"))
    await producer.start()
    await consumer.start()
    sender = Sender(producer)
    rng = random.Random(0xD15C)
    try:
        for round_no in range(ROUNDS):
            target = len(sender.acked) + rng.randint(20, 1_500)
            await wait_until(
                lambda target=target: sender.until_acked(target),
                timeout=60, interval=0, what=f"round {round_no}: sends before the fill",
            )  # fmt: skip
            refused = len(sender.refusals)
            filler = store / f"filler-{round_no}"
            child = await asyncio.create_subprocess_exec(sys.executable, "-c", FILLER, str(filler))
            assert await child.wait() == 0, "the filler failed"
            await wait_until(
                lambda refused=refused: sender.until_refused(refused),
                timeout=60, interval=0, what=f"round {round_no}: a refusal once the disk is full",
            )  # fmt: skip
            assert broker.proc.running, f"the broker died:\n{broker.proc.tail(40)}"
            answer = sender.refusals[-1]
            assert answer.code == ResponseCode.SERVICE_NOT_AVAILABLE, answer
            assert "the broker's disk is full [CL: " in str(answer.remark), answer.remark
            assert " CQ: " in str(answer.remark) and " INDEX: " in str(answer.remark)
            filler.unlink()
            await wait_until(sender.send, timeout=60, interval=0.05, what="sends accepted again")
            assert broker.proc.running
            await wait_until(
                lambda: _all_readable(consumer, sender.acked),
                timeout=60, what=f"round {round_no}: every acknowledged message readable",
            )  # fmt: skip
    finally:
        await consumer.shutdown()
        await producer.shutdown()
    assert len(sender.acked) > ROUNDS * 20


async def _all_readable(consumer: PullConsumer, acked: set[str]) -> bool:
    return acked <= await readable_keys(consumer)


@pytest.mark.parametrize("kind", ["tmpfs", "ext4"])
async def test_sudden_full_disk_is_refused_and_healed(
    start_process: StartProcess, tmp_path: Path, kind: str
) -> None:
    with small_fs(kind, tmp_path) as mount:
        await rounds_on(start_process, tmp_path, mount / "store")
