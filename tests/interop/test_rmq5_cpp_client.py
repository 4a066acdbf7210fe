"""One store, two protocol generations: the official RocketMQ 5 Python SDK (gRPC v2,
in its own venv) and the stock 4.x C++ client (remoting, PyPI ``rocketmq`` 0.4.4)
against the same real ``mqnamesrv`` + ``mqbroker`` processes.

What the SDK writes over gRPC, the C++ client reads: its PullConsumer every message
with the SDK's message id, key, tag and body, and its PushConsumer only the tag it
subscribed to (the ConsumeQueue's tag hash of a gRPC-written message). What the C++
producer writes, the SDK's SimpleConsumer receives with the id, key and tag of the
C++ client's SendResult and message. The broker's gRPC endpoint is the default one
(on, a free port for a broker on ``listenPort=0``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.interop.rmq5.sdk_venv import ensure_sdk_python, run_sdk
from tests.interop.stock_support import (
    CONSUMED,
    PRODUCED,
    PULLED,
    StartProcess,
    expected_messages,
    finish,
    read_pulled,
    read_received,
    read_send_results,
    start_cpp,
)
from tests.support.cluster import create_topic, start_broker, start_namesrv

pytestmark = [
    pytest.mark.interop,
    pytest.mark.timeout(240),
    pytest.mark.skipif(
        importlib.util.find_spec("rocketmq") is None, reason="PyPI rocketmq (x86_64 Linux only)"
    ),
]

_CPP_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def sdk_python() -> Path:
    return ensure_sdk_python()


async def test_grpc_written_messages_are_read_by_the_stock_cpp_client(
    start_process: StartProcess, tmp_path: Path, sdk_python: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, metricsPort=0)
    topic, home = "V5ToCpp", tmp_path / "cpp-home"
    await create_topic(broker.addr, topic)
    sent = {}
    for tag, prefix, count in (("TagA", "a", 6), ("TagB", "b", 4)):
        result = await run_sdk(
            sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", topic,
            "--count", str(count), "--tag", tag, "--prefix", prefix,
        )  # fmt: skip
        for i, entry in enumerate(result["sent"]):
            sent[f"key-{prefix}{i}"] = (tag, entry["id"], f"{prefix}{i}")
    push_out, pull_out = tmp_path / "push.txt", tmp_path / "pull.txt"
    push = start_cpp(
        start_process, home, "cpp-push",
        ["push", namesrv, topic, "GID_cpp_push", "TagB", "4", "45", str(push_out),
         "--linger-s", "1"],
        CONSUMED,
    )  # fmt: skip
    pull = start_cpp(
        start_process, home, "cpp-pull",
        ["pull", namesrv, topic, "GID_cpp_pull", "*", str(pull_out)], PULLED,
    )  # fmt: skip
    await finish(pull, _CPP_TIMEOUT_S)
    pulled = read_pulled(pull_out)
    # Every message once, with what the SDK gave it: id (its UNIQ_KEY), key, tag, body.
    assert sorted(r.key for r in pulled) == sorted(sent)
    assert {r.key: (r.tag, r.msg_id, r.body) for r in pulled} == sent
    await finish(push, _CPP_TIMEOUT_S)
    pushed = read_received(push_out)
    assert sorted((r.key, r.tag) for r in pushed) == [(f"key-b{i}", "TagB") for i in range(4)]


async def test_cpp_written_messages_are_received_by_the_sdk(
    start_process: StartProcess, tmp_path: Path, sdk_python: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, metricsPort=0)
    topic, home = "CppToV5", tmp_path / "cpp-home"
    await create_topic(broker.addr, topic)
    results = home / "sync.results"
    produce = start_cpp(
        start_process, home, "cpp-produce",
        ["produce", namesrv, topic, "sync", "12", "--prefix", "c", "--shards", "4",
         "--results", str(results)],
        PRODUCED,
    )  # fmt: skip
    produced = await finish(produce, _CPP_TIMEOUT_S)
    assert produced["errors"] == "0", produce.tail()
    ids = {key: msg_id for key, (_, msg_id) in read_send_results(results).items()}
    got = await run_sdk(
        sdk_python, tmp_path, "simple", "--endpoint", broker.grpc, "--topic", topic,
        "--group", "GID_from_cpp", "--expect", "12",
    )  # fmt: skip
    received = got["received"]
    expected = expected_messages(12, "c", 4)
    assert sorted(m["id"] for m in received) == sorted(ids.values())  # each once
    by_key = {m["keys"][0]: m for m in received}
    for sent in expected:
        message = by_key[sent.key]
        assert message["keys"] == [sent.key] and message["tag"] == sent.tag
        assert message["id"] == ids[sent.key]
        assert message["body"].startswith(f"{sent.key}|{sent.tag}|{sent.shard}|{sent.seq}|")
        assert message["attempt"] == 1 and message["topic"] == topic
