"""The official RocketMQ 5 Node.js SDK (npm ``rocketmq-client-nodejs`` 1.0.8, pinned in
``tests/interop/node5``) against real ``mqnamesrv`` + ``mqbroker`` processes over gRPC:
it produces and consumes with its SimpleConsumer (which only ever names queue 0), and
its messages cross to and from our remoting client through one store."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.common.message import Message
from tests.support.cluster import create_topic, start_broker, start_namesrv
from tests.support.consume import pull_keys
from tests.support.procs import ManagedProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

NODE5_DIR = Path(__file__).resolve().parent / "node5"
_TIMEOUT_S = 90


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not (NODE5_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir():
        pytest.fail(
            "rocketmq-client-nodejs is not installed: run `make interop-deps` "
            "(npm ci --prefix tests/interop/node5)",
            pytrace=False,
        )
    return node


async def node_sdk(home: Path, *args: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        _node(),
        str(NODE5_DIR / "driver.js"),
        *args,
        cwd=NODE5_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(home)},  # the SDK logs under ~/logs
    )
    try:
        async with asyncio.timeout(_TIMEOUT_S):
            out, err = await proc.communicate()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    assert proc.returncode == 0, f"node {args[0]} failed:\n{err.decode()[-3000:]}"
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


async def test_node_sdk_produces_and_simple_consumes_across_protocols(
    start_process: Callable[..., ManagedProcess], tmp_path: Path
) -> None:
    _node()
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, grpcListenPort=-1, metricsPort=0)
    await create_topic(broker.addr, "NodeTopic")
    sent = await node_sdk(tmp_path, "produce", broker.grpc, "NodeTopic", "4")
    client = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="remoting")
    async with Producer("PG_node", client_config=client) as producer:
        message = Message(topic="NodeTopic", body=b"from-remoting")
        message.tags = "TagV4"
        message.keys = ["v4-key"]
        await producer.send(message)
    got = await node_sdk(tmp_path, "simple", broker.grpc, "NodeTopic", "GID_node", "5", "40000")
    received = got["received"]
    assert {m["id"] for m in received} >= {s["id"] for s in sent["sent"]}
    assert len(received) == 5
    bodies = sorted(m["body"] for m in received)
    assert bodies == ["from-remoting", "node-0", "node-1", "node-2", "node-3"]
    for m in received:
        if m["body"].startswith("node-"):
            i = m["body"][5:]
            assert m["tag"] == "TagNode" and m["keys"] == [f"node-key-{i}"]
            assert m["properties"] == {"index": i} and m["attempt"] == 1
    # Our remoting client reads what the Node SDK wrote.
    keys = await pull_keys(client, "GID_remoting_reader", "NodeTopic", 5)
    assert sorted(keys) == [f"node-key-{i}" for i in range(4)] + ["v4-key"]
