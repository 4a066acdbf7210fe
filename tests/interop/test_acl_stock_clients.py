"""Plain ACL with the stock clients: the C++ client (PyPI ``rocketmq``,
``set_session_credentials``) and ali-ons (``accessKey``/``secretKey``) against a real
``mqbroker`` with ``aclEnable=true``.

With the right credentials each produces 300 keyed messages and consumes every
one exactly once with its push consumer (signed heartbeats with subscriptions,
offset queries and commits, pulls). With a wrong secret every send fails, and the
broker's log shows it refused them with NO_PERMISSION and RocketMQ's reason.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.acl_sign import SessionCredentials
from tests.interop.stock_support import (
    CONSUMED,
    PRODUCED,
    StartProcess,
    assert_exactly_once,
    expected_messages,
    finish,
    read_received,
    start_cpp,
    start_node,
)
from tests.support.cluster import BrokerProcess, start_broker, start_namesrv
from tests.support.wait import wait_until

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

CLIENT_TIMEOUT_S = 50.0
CPP_TOPIC = "AclCppTopic"
NODE_TOPIC = "AclNodeTopic"
# Each stock client has its own account: PUB|SUB on its topic, SUB on any group.
CPP = SessionCredentials("cpp_user1", "cpp_secret1")
NODE = SessionCredentials("node_user1", "node_secret1")
ADMIN = SessionCredentials("admin_user", "admin_secret1")

ACL_YAML = f"""\
accounts:
  - accessKey: {CPP.access_key}
    secretKey: {CPP.secret_key}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {CPP_TOPIC}=PUB|SUB
  - accessKey: {NODE.access_key}
    secretKey: {NODE.secret_key}
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {NODE_TOPIC}=PUB|SUB
  - accessKey: {ADMIN.access_key}
    secretKey: {ADMIN.secret_key}
    admin: true
"""


async def acl_cluster(
    start_process: StartProcess, tmp_path: Path, topic: str
) -> tuple[str, BrokerProcess]:
    """A name server and an ACL broker holding ``topic`` (4 queues, made by the admin)."""
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL_YAML, "utf-8")
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(
        start_process, tmp_path, namesrv, aclEnable=True, aclPlainFile=str(acl_file)
    )
    async with MQAdmin(namesrv, credentials=ADMIN) as admin:
        await admin.create_topic(broker.addr, TopicConfig(topic, 4, 4))
    return namesrv, broker


async def wait_refused(broker: BrokerProcess, reason: str) -> None:
    """The broker logged a refusal with ``reason`` (its INFO line for each one)."""

    def logged() -> bool:
        log = broker.proc.stderr_path.read_text("utf-8", "replace")
        return "acl refused code=" in log and reason in log

    await wait_until(logged, timeout=10, what=f"the broker refusing: {reason}")


def cpp_credentials(creds: SessionCredentials) -> list[str]:
    return ["--access-key", creds.access_key, "--secret-key", creds.secret_key]


@pytest.mark.skipif(
    importlib.util.find_spec("rocketmq") is None, reason="PyPI rocketmq (x86_64 Linux only)"
)
async def test_cpp_client_signs_and_is_refused_with_a_wrong_secret(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, broker = await acl_cluster(start_process, tmp_path, CPP_TOPIC)
    home = tmp_path / "cpp"
    sent = expected_messages(300, "acl")
    out = tmp_path / "cpp-push.txt"
    consumer = start_cpp(
        start_process, home, "cpp-acl-push",
        [*cpp_credentials(CPP), "push", namesrv, CPP_TOPIC, "GID_acl_cpp", "*",
         str(len(sent)), "40", str(out)],
        CONSUMED,
    )  # fmt: skip
    producer = start_cpp(
        start_process, home, "cpp-acl-produce",
        [*cpp_credentials(CPP), "produce", namesrv, CPP_TOPIC, "sync", str(len(sent)),
         "--prefix", "acl"],
        PRODUCED,
    )  # fmt: skip
    result = await finish(producer, CLIENT_TIMEOUT_S)
    assert (result["count"], result["errors"]) == (str(len(sent)), "0"), producer.tail()
    consumed = await finish(consumer, CLIENT_TIMEOUT_S)
    assert consumed["distinct"] == str(len(sent)), consumer.tail()
    assert_exactly_once(read_received(out), sent)

    wrong = SessionCredentials(CPP.access_key, "not-the-secret")
    refused = start_cpp(
        start_process, home, "cpp-acl-wrong",
        [*cpp_credentials(wrong), "produce", namesrv, CPP_TOPIC, "sync", "3", "--prefix", "bad"],
        PRODUCED,
    )  # fmt: skip
    result = await finish(refused, CLIENT_TIMEOUT_S)
    assert (result["count"], result["errors"]) == ("3", "3"), refused.tail()
    await wait_refused(broker, f"Check signature failed for accessKey={CPP.access_key}")


async def test_alions_signs_and_is_refused_with_a_wrong_secret(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, broker = await acl_cluster(start_process, tmp_path, NODE_TOPIC)
    home = tmp_path / "node-home"
    signed = {"ONS_ACCESS_KEY": NODE.access_key, "ONS_SECRET_KEY": NODE.secret_key}
    sent = expected_messages(300, "acl")
    producer = start_node(
        start_process, home, "alions-acl-produce", "alions_produce.js",
        [namesrv, NODE_TOPIC, str(len(sent)), "acl"], PRODUCED, env=signed,
    )  # fmt: skip
    result = await finish(producer, CLIENT_TIMEOUT_S)
    assert (result["count"], result["errors"]) == (str(len(sent)), "0"), producer.tail()
    out = tmp_path / "alions-push.txt"
    consumer = start_node(
        start_process, home, "alions-acl-consume", "alions_consume.js",
        [namesrv, NODE_TOPIC, "GID_acl_node", "*", str(len(sent)), "40000", str(out)],
        CONSUMED, env=signed,
    )  # fmt: skip
    consumed = await finish(consumer, CLIENT_TIMEOUT_S)
    assert consumed["errors"] == "0", consumer.tail()
    assert_exactly_once(read_received(out), sent)

    wrong = {**signed, "ONS_SECRET_KEY": "not-the-secret"}
    refused = start_node(
        start_process, home, "alions-acl-wrong", "alions_produce.js",
        [namesrv, NODE_TOPIC, "3", "bad"], PRODUCED, env=wrong,
    )  # fmt: skip
    result = await finish(refused, CLIENT_TIMEOUT_S)
    assert (result["count"], result["errors"]) == ("3", "3"), refused.tail()
    assert "Check signature failed" in refused.tail(60)
    await wait_refused(broker, f"Check signature failed for accessKey={NODE.access_key}")
