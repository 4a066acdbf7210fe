"""Stock clients get their routes from ``mqnamesrv`` and use them.

For each client: a real ``mqnamesrv`` process, a ``BrokerDouble`` serving on 127.0.0.1
and registered with it, and the stock client in its own process sending one message
by topic, knowing only the name server's address. The message can reach the double
only through the broker address in the route, so its arrival (and the client's
printed result, built from the double's reply) proves the client parsed the route.

- C++ client: PyPI ``rocketmq`` 0.4.4 (core 1.2.x, version 63, SEND_MESSAGE), run
  through ``tests/interop/cpp_producer.py`` with ``HOME`` in a temporary directory
  (it writes logs there; see PITFALLS.md) and its log size capped.
- ali-ons 3.12.0 (version 121, SEND_MESSAGE_V2), installed by ``make test`` into
  ``tests/interop/node`` and run with ``node tests/interop/node/alions_producer.js``.

Both are older than 4.9.4, so they get the fastjson route form (``{0:"ip:port"}``).
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from aiorocketmq.remoting.codes import RequestCode
from tests.support.broker_double import BrokerDouble
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

REPO_ROOT = Path(__file__).resolve().parents[2]
NODE_DIR = REPO_ROOT / "tests" / "interop" / "node"
NAMESRV_READY = r"mqnamesrv ready address=(?P<addr>\S+) pid=\d+"
CLIENT_TIMEOUT_S = 45.0
FIRST_QUEUE_OFFSET = 42  # not 0, so a client reading nothing (0) cannot pass

StartProcess = Callable[..., ManagedProcess]


@pytest.fixture
async def broker() -> AsyncIterator[BrokerDouble]:
    double = BrokerDouble(topics={"TopicTest": 4}, first_queue_offset=FIRST_QUEUE_OFFSET)
    await double.serve()
    yield double
    await double.close()


async def namesrv_with_broker(
    start_process: StartProcess, tmp_path: Path, broker: BrokerDouble
) -> str:
    """Start mqnamesrv, register the double, return the name server's address."""
    args = ["-m", "aiorocketmq.cli.namesrv", "--listenPort", "0", "--bindAddress", "127.0.0.1"]
    proc = start_process(
        args, name="namesrv", ready=NAMESRV_READY, wait=False, env={"HOME": str(tmp_path)}
    )
    addr = (await proc.wait_ready_async())["addr"]
    await broker.register(addr)
    return addr


async def run_client(proc: ManagedProcess) -> dict[str, str]:
    """Wait for the client's SEND_RESULT line and its clean exit; return the line's fields."""
    groups = await proc.wait_ready_async(timeout=CLIENT_TIMEOUT_S)
    await wait_until(lambda: not proc.running, timeout=CLIENT_TIMEOUT_S, what="client exit")
    assert proc.returncode == 0, proc.tail()
    return groups


def assert_one_send(broker: BrokerDouble, code: int, topic_field: str, body: bytes) -> None:
    (send,) = broker.sends()
    assert send.code == code
    assert send.ext_fields[topic_field] == "TopicTest"
    assert bytes(send.body) == body


@pytest.mark.skipif(
    importlib.util.find_spec("rocketmq") is None, reason="PyPI rocketmq (x86_64 Linux only)"
)
async def test_cpp_client_routes_through_mqnamesrv(
    start_process: StartProcess, tmp_path: Path, broker: BrokerDouble
) -> None:
    addr = await namesrv_with_broker(start_process, tmp_path, broker)
    home = tmp_path / "cpp-home"
    home.mkdir()
    proc = start_process(
        ["tests/interop/cpp_producer.py", addr, "TopicTest", "hello from C++"],
        name="cpp-producer",
        ready=r"SEND_RESULT status=(?P<status>\d+) msg_id=(?P<msg_id>\S+) offset=(?P<offset>\d+)",
        wait=False,
        env={"HOME": str(home)},
    )
    result = await run_client(proc)
    assert_one_send(broker, RequestCode.SEND_MESSAGE, "topic", b"hello from C++")
    assert result["status"] == "0"  # SEND_OK
    # The printed result is built from the double's reply (queueOffset as a string)
    # to this very message (its UNIQ_KEY).
    assert result["offset"] == str(FIRST_QUEUE_OFFSET)
    (send,) = broker.sends()
    assert f"UNIQ_KEY\x01{result['msg_id']}\x02" in send.ext_fields["properties"]
    log_bytes = sum(p.stat().st_size for p in home.rglob("*") if p.is_file())
    assert log_bytes < 32 * 1024 * 1024, f"C++ client logs grew to {log_bytes} bytes"


async def test_alions_routes_through_mqnamesrv(
    start_process: StartProcess, tmp_path: Path, broker: BrokerDouble
) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (NODE_DIR / "node_modules" / "ali-ons").is_dir():
        pytest.fail(
            "ali-ons is not installed: run `make test` (it runs "
            "`npm install --prefix tests/interop/node`)",
            pytrace=False,
        )
    addr = await namesrv_with_broker(start_process, tmp_path, broker)
    script = str(NODE_DIR / "alions_producer.js")
    # start_process runs sys.executable; run node through it with os.execv.
    launcher = f"import os, sys; os.execv({node!r}, [{node!r}, *sys.argv[1:]])"
    proc = start_process(
        ["-c", launcher, script, addr, "TopicTest", "hello from ali-ons"],
        name="alions-producer",
        ready=r"SEND_RESULT status=(?P<status>\w+) msg_id=(?P<msg_id>\S+) "
        r"queue=(?P<queue>\d+) offset=(?P<offset>\d+)",
        wait=False,
        env={"HOME": str(tmp_path)},
    )
    result = await run_client(proc)
    assert_one_send(broker, RequestCode.SEND_MESSAGE_V2, "b", b"hello from ali-ons")
    assert result["status"] == "SEND_OK"
    assert int(result["queue"]) in range(4)  # a queue of the route's 4
    (send,) = broker.sends()
    assert result["queue"] == send.ext_fields["e"]
    assert result["offset"] == str(FIRST_QUEUE_OFFSET)
