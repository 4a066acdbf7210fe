"""The official RocketMQ 5 Python SDK (PyPI ``rocketmq-python-client`` 5.1.2, in its own
venv) against real ``mqnamesrv`` + ``mqbroker`` processes serving gRPC v2 beside
remoting: it produces and consumes (SimpleConsumer, PushConsumer), and the same
messages cross between the two protocols through one store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.common.message import Message
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.remoting.acl_sign import SessionCredentials
from aiorocketmq.remoting.broker_admin_headers import CreateTopicRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.interop.rmq5.sdk_venv import ensure_sdk_python
from tests.interop.rmq5.sdk_venv import run_sdk as sdk
from tests.support.cluster import (
    BrokerProcess,
    broker_request,
    create_topic,
    start_broker,
    start_namesrv,
)
from tests.support.consume import pull_keys
from tests.support.mqadmin import Admin
from tests.support.procs import ManagedProcess

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def sdk_python() -> Path:
    return ensure_sdk_python()


async def _cluster(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, **settings: Any
) -> tuple[str, BrokerProcess]:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(
        start_process, tmp_path, namesrv, grpcListenPort=-1, metricsPort=0, **settings
    )
    return namesrv, broker


def _client(namesrv: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="remoting")


async def test_sdk_produces_and_simple_consumes_and_remoting_reads_the_same(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    namesrv, broker = await _cluster(start_process, tmp_path)
    await create_topic(broker.addr, "V5Topic")
    endpoint = broker.grpc
    sent = await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", endpoint, "--topic", "V5Topic",
        "--count", "5",
    )  # fmt: skip
    ids = [s["id"] for s in sent["sent"]]
    got = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", endpoint, "--topic", "V5Topic",
        "--group", "GID_simple", "--expect", "5",
    )  # fmt: skip
    received = got["received"]
    assert sorted(m["id"] for m in received) == sorted(ids)  # each once: acked, none back
    for message in received:
        i = message["body"][1:]
        assert message["tag"] == "TagA" and message["keys"] == [f"key-m{i}"]
        assert message["properties"] == {"index": i} and message["attempt"] == 1
    # One store, two protocols: our remoting client reads what the SDK wrote.
    keys = await pull_keys(_client(namesrv), "GID_remoting_reader", "V5Topic", 5)
    assert sorted(keys) == [f"key-m{i}" for i in range(5)]


async def test_remoting_producer_writes_what_the_sdk_receives(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    namesrv, broker = await _cluster(start_process, tmp_path)
    await create_topic(broker.addr, "FromRemoting")
    async with Producer("PG_v4", client_config=_client(namesrv)) as producer:
        for i in range(3):
            message = Message(topic="FromRemoting", body=f"v4-{i}".encode())
            message.tags = "TagV4"
            message.keys = [f"k4-{i}"]
            message.properties["origin"] = "remoting"
            await producer.send(message)
    got = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", broker.grpc, "--topic", "FromRemoting",
        "--group", "GID_from_v4", "--expect", "3",
    )  # fmt: skip
    received = sorted(got["received"], key=lambda m: m["body"])
    assert [m["body"] for m in received] == ["v4-0", "v4-1", "v4-2"]
    assert {m["tag"] for m in received} == {"TagV4"}
    assert [m["keys"] for m in received] == [["k4-0"], ["k4-1"], ["k4-2"]]
    assert all(m["properties"] == {"origin": "remoting"} for m in received)
    assert all(len(m["id"]) == 32 for m in received)  # the 4.x client's UNIQ_KEY


async def test_change_invisible_duration_brings_a_message_back_not_early(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    _, broker = await _cluster(start_process, tmp_path)
    await create_topic(broker.addr, "Redeliver")
    await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", "Redeliver",
        "--count", "2",
    )  # fmt: skip
    got = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", broker.grpc, "--topic", "Redeliver",
        "--group", "GID_redeliver", "--expect", "4", "--mode", "redeliver", "--invisible", "10",
    )  # fmt: skip
    by_id: dict[str, list[dict[str, Any]]] = {}
    for message in got["received"]:
        by_id.setdefault(message["id"], []).append(message)
    assert len(by_id) == 2
    for deliveries in by_id.values():
        assert [m["attempt"] for m in deliveries] == [1, 2]
        # Made invisible for 1 s by change_invisible_duration: never back earlier.
        assert deliveries[1]["received_at"] - deliveries[0]["received_at"] >= 0.95


async def test_fifo_messages_arrive_in_order_for_an_orderly_group(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    _, broker = await _cluster(start_process, tmp_path)
    await create_topic(broker.addr, "Fifo")
    group = SubscriptionGroupConfig("GID_fifo", consume_message_orderly=True)
    await broker_request(
        broker.addr,
        RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group.encode()
        ),
    )
    await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", "Fifo",
        "--count", "6", "--kind", "fifo", "--group", "order-7",
    )  # fmt: skip
    got = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", broker.grpc, "--topic", "Fifo",
        "--group", "GID_fifo", "--expect", "6",
    )  # fmt: skip
    assert [m["body"] for m in got["received"]] == [f"m{i}" for i in range(6)]
    assert {m["group"] for m in got["received"]} == {"order-7"}


async def test_received_but_unacked_messages_survive_a_broker_restart(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    namesrv, broker = await _cluster(start_process, tmp_path)
    await create_topic(broker.addr, "Restart")
    endpoint = broker.grpc
    await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", endpoint, "--topic", "Restart",
        "--count", "3",
    )  # fmt: skip
    held = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", endpoint, "--topic", "Restart",
        "--group", "GID_restart", "--expect", "3", "--mode", "hold", "--invisible", "10",
    )  # fmt: skip
    assert len(held["received"]) == 3
    assert broker.proc.stop() == 0  # SIGTERM: a clean stop
    port = endpoint.rpartition(":")[2]
    again = await start_broker(start_process, tmp_path, namesrv, grpcListenPort=port, metricsPort=0)
    got = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", again.grpc, "--topic", "Restart",
        "--group", "GID_restart", "--expect", "3", "--timeout", "60",
    )  # fmt: skip
    received = got["received"]
    assert sorted(m["id"] for m in received) == sorted(m["id"] for m in held["received"])
    assert {m["attempt"] for m in received} == {2}


async def test_push_consumer_gets_a_failed_message_again(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    _, broker = await _cluster(start_process, tmp_path)
    await create_topic(broker.addr, "Push")
    sent = await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", "Push",
        "--count", "3",
    )  # fmt: skip
    got = await sdk(
        sdk_python, tmp_path, "push", "--endpoint", broker.grpc, "--topic", "Push",
        "--group", "GID_push", "--expect", "3", "--fail-first",
    )  # fmt: skip
    attempts: dict[str, list[int]] = {}
    for message in got["received"]:
        attempts.setdefault(message["id"], []).append(message["attempt"])
    assert set(attempts) == {s["id"] for s in sent["sent"]}
    assert all(a[:2] == [1, 2] for a in attempts.values()), attempts


async def test_transactions_commit_roll_back_and_answer_the_check(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    _, broker = await _cluster(
        start_process, tmp_path, transactionTimeOut=500, transactionCheckInterval=300
    )
    await create_topic(broker.addr, "Tx")
    committed = await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", "Tx",
        "--count", "2", "--kind", "transaction", "--prefix", "c",
    )  # fmt: skip
    # m0, m2: left open and committed by the SDK's checker; m1, m3: rolled back.
    mixed = await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", "Tx",
        "--count", "4", "--kind", "transaction-mixed", "--prefix", "x",
    )  # fmt: skip
    open_ids = {mixed["sent"][0]["id"], mixed["sent"][2]["id"]}
    assert open_ids <= set(mixed["checked"])
    got = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", broker.grpc, "--topic", "Tx",
        "--group", "GID_tx", "--expect", "4",
    )  # fmt: skip
    assert sorted(m["body"] for m in got["received"]) == ["c0", "c1", "x0", "x2"]
    expected = {s["id"] for s in committed["sent"]} | open_ids
    assert {m["id"] for m in got["received"]} == expected


async def test_delay_messages_arrive_at_their_time_not_before(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    _, broker = await _cluster(start_process, tmp_path)
    await create_topic(broker.addr, "Delay")
    sent = await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", "Delay",
        "--count", "2", "--kind", "delay", "--delay-s", "3",
    )  # fmt: skip
    got = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", broker.grpc, "--topic", "Delay",
        "--group", "GID_delay", "--expect", "2",
    )  # fmt: skip
    received = got["received"]
    assert {m["id"] for m in received} == {s["id"] for s in sent["sent"]}
    for message in received:
        deliver_s = message["delivery_timestamp"] / 1000
        assert deliver_s >= min(s["sent_at"] for s in sent["sent"]) + 1.5
        assert message["received_at"] >= deliver_s  # never early


async def test_topic_message_types_set_by_mqadmin_reach_the_sdk(
    start_process: Callable[..., ManagedProcess],
    tmp_path: Path,
    sdk_python: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``mqadmin updateTopic -a +message.type=FIFO`` (RocketMQ 5's form): the SDK's
    route says FIFO, so its FIFO messages go and its NORMAL ones are refused (by the
    SDK itself, as against RocketMQ 5); a topic made without a type takes both."""
    namesrv, broker = await _cluster(start_process, tmp_path)
    admin = Admin(capsys, namesrv)
    await admin.table(
        "updateTopic", "-b", broker.addr, "-t", "FifoOnly", "-a", "+message.type=FIFO"
    )
    await admin.table("updateTopic", "-b", broker.addr, "-t", "Untyped")
    for topic, normal_ok in (("FifoOnly", False), ("Untyped", True)):
        fifo = await sdk(
            sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", topic,
            "--count", "1", "--kind", "fifo",
        )  # fmt: skip
        assert "id" in fifo["sent"][0], fifo
        normal = await sdk(
            sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", topic,
            "--count", "1", "--keep-going",
        )  # fmt: skip
        assert ("id" in normal["sent"][0]) is normal_ok, normal
        if not normal_ok:
            assert "NORMAL" in normal["sent"][0]["error"], normal


async def test_the_sdk_signs_its_calls_for_a_broker_with_acl_on(
    start_process: Callable[..., ManagedProcess], tmp_path: Path, sdk_python: Path
) -> None:
    """``aclEnable`` with a ``plain_acl.yml``: the SDK's credentials (its
    MQv2-HMAC-SHA1 ``authorization`` header) produce and consume; a wrong secret is
    refused (UNAUTHORIZED) and nothing it sent arrives."""
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(
        "accounts:\n"
        "  - accessKey: sdk_user1\n    secretKey: sdk_secret1\n    admin: false\n"
        "    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n"
        "    topicPerms:\n      - Signed=PUB|SUB\n"
        "  - accessKey: admin_user\n    secretKey: admin_secret1\n    admin: true\n",
        "utf-8",
    )
    _, broker = await _cluster(start_process, tmp_path, aclEnable=True, aclPlainFile=str(acl))
    admin = RemotingClient(credentials=SessionCredentials("admin_user", "admin_secret1"))
    try:
        header = CreateTopicRequestHeader("Signed", "TBW102", 4, 4, 6, "SINGLE_TAG")
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        reply = await admin.invoke(broker.addr, request, 5000)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
    finally:
        await admin.close()
    good = ("--ak", "sdk_user1", "--sk", "sdk_secret1")
    bad = ("--ak", "sdk_user1", "--sk", "not-the-secret", "--keep-going")
    refused = await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", "Signed",
        "--count", "1", "--prefix", "bad", "--timeout", "10", *bad,
    )  # fmt: skip
    assert "error" in refused["sent"][0], refused  # the SDK gives up at its route query
    log = (tmp_path / "logs" / "rocketmq_python" / "rocketmq_client.log").read_text("utf-8")
    assert "40100, Check signature failed for accessKey=sdk_user1" in log  # UNAUTHORIZED
    sent = await sdk(
        sdk_python, tmp_path, "produce", "--endpoint", broker.grpc, "--topic", "Signed",
        "--count", "3", *good,
    )  # fmt: skip
    got = await sdk(
        sdk_python, tmp_path, "simple", "--endpoint", broker.grpc, "--topic", "Signed",
        "--group", "GID_signed", "--expect", "3", *good,
    )  # fmt: skip
    assert sorted(m["id"] for m in got["received"]) == sorted(s["id"] for s in sent["sent"])
