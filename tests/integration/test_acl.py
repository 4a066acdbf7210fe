"""Plain ACL against real ``mqnamesrv`` + ``mqbroker`` processes (``aclEnable=true``).

One broker reads a ``plain_acl.yml`` with an application account (PUB|SUB on
one topic, SUB on groups, nothing else), an admin account and a global white
list holding 127.0.0.2 only. Checked with our client, signing:

- the admin account creates topics; the application account is refused (admin code);
- the application account produces 300 keys and reads every one back with a pull
  and a push consumer (heartbeat, offsets, pulls all signed and allowed);
- a wrong secret, no credentials, and a topic outside the account are refused with
  NO_PERMISSION and RocketMQ's reason;
- an unsigned request from the white-listed 127.0.0.2 is served, from 127.0.0.1 refused;
- editing the file grants the topic within the watch interval; a malformed edit
  keeps the last good accounts in force, and the broker keeps serving.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.cli.admin import main
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import MQBrokerError, SendFailedError
from aiorocketmq.client.producer import Producer
from aiorocketmq.common.message import Message
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.acl_sign import SessionCredentials
from aiorocketmq.remoting.client import RemotingClient, split_address
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import RemotingConnection
from tests.support.cluster import in_process_broker, start_broker, start_namesrv
from tests.support.consume import pull_keys, push_keys
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
TOPIC = "AclTopic"
OTHER = "AclOther"
APP = SessionCredentials("app_user1", "app_secret1")
ADMIN = SessionCredentials("admin_user", "admin_secret1")


def acl_yaml(other_perm: str = "") -> str:
    extra = f"\n      - {OTHER}={other_perm}" if other_perm else ""
    return f"""\
globalWhiteRemoteAddresses:
  - 127.0.0.2
accounts:
  - accessKey: {APP.access_key}
    secretKey: {APP.secret_key}
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {TOPIC}=PUB|SUB{extra}
  - accessKey: {ADMIN.access_key}
    secretKey: {ADMIN.secret_key}
    admin: true
"""


def client_config(namesrv: str, name: str, creds: SessionCredentials | None) -> ClientConfig:
    return ClientConfig(
        namesrv_addr=namesrv,
        client_ip="127.0.0.1",
        instance_name=name,
        access_key=creds.access_key if creds else None,
        secret_key=creds.secret_key if creds else None,
    )


async def send_one(namesrv: str, name: str, creds: SessionCredentials | None, topic: str) -> None:
    async with Producer("PG_acl", client_config=client_config(namesrv, name, creds)) as producer:
        await producer.send(Message(topic, b"x"))


async def refusal_of(namesrv: str, name: str, creds: SessionCredentials | None, topic: str) -> str:
    """The broker's NO_PERMISSION remark for one send."""
    with pytest.raises(SendFailedError) as failed:
        await send_one(namesrv, name, creds, topic)
    last = failed.value.__cause__
    assert isinstance(last, MQBrokerError), failed.value
    assert last.code == ResponseCode.NO_PERMISSION
    return str(last.remark)


async def raw_request(addr: str, source_ip: str) -> RemotingCommand:
    """An unsigned GET_BROKER_RUNTIME_INFO from ``source_ip`` (any 127/8 address binds)."""
    host, port = split_address(addr)
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(
        lambda: RemotingConnection(None), host, port, local_addr=(source_ip, 0)
    )
    try:
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        return await conn.invoke(request, 5.0)
    finally:
        conn.close()


async def produce(namesrv: str, keys: list[str]) -> None:
    async with Producer("PG_acl", client_config=client_config(namesrv, "app-p", APP)) as producer:
        for key in keys:
            await producer.send(Message(TOPIC, key.encode(), properties={"KEYS": key}))


async def test_accounts_signatures_white_list_and_reload(
    start_process: StartProcess, tmp_path: Path
) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(acl_yaml(), "utf-8")
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(
        start_process, tmp_path, namesrv,
        aclEnable=True, aclPlainFile=str(acl_file), aclFileWatchIntervalMillis=100,
    )  # fmt: skip

    # Topics: only the admin account may create them.
    async with MQAdmin(namesrv, credentials=APP) as app_admin:
        with pytest.raises(MQBrokerError) as refused:
            await app_admin.create_topic(broker.addr, TopicConfig(TOPIC, 4, 4))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert refused.value.remark == (
        "Need admin permission for request code=17, but accessKey=app_user1 is not"
    )
    async with MQAdmin(namesrv, credentials=ADMIN) as admin:
        for topic in (TOPIC, OTHER):
            await admin.create_topic(broker.addr, TopicConfig(topic, 4, 4))

    # The application account's whole flow: send, pull, push (heartbeat, offsets).
    keys = [f"acl-{i:04d}" for i in range(300)]
    await produce(namesrv, keys)
    app = client_config(namesrv, "app-consume", APP)
    assert await pull_keys(app, "CG_acl_pull", TOPIC, len(keys)) == Counter(keys)
    assert await push_keys(app, "CG_acl_push", TOPIC, len(keys)) == Counter(keys)

    # Refusals, with RocketMQ's reasons.
    wrong = SessionCredentials(APP.access_key, "not-the-secret")
    assert await refusal_of(namesrv, "wrong", wrong, TOPIC) == (
        "Check signature failed for accessKey=app_user1"
    )
    assert await refusal_of(namesrv, "anon", None, TOPIC) == "No accessKey is configured"
    stranger = SessionCredentials("stranger1", "whatever1")
    assert await refusal_of(namesrv, "stranger", stranger, TOPIC) == "No acl config for stranger1"
    assert await refusal_of(namesrv, "other", APP, OTHER) == (
        f"No default permission for topic={OTHER}"
    )

    # The global white list: 127.0.0.2 needs no credentials, 127.0.0.1 does.
    white = await raw_request(broker.addr, "127.0.0.2")
    assert white.code == ResponseCode.SUCCESS, white.remark
    black = await raw_request(broker.addr, "127.0.0.1")
    assert (black.code, black.remark) == (ResponseCode.NO_PERMISSION, "No accessKey is configured")

    # Hot reload: granting PUB on the other topic takes effect without a restart.
    acl_file.write_text(acl_yaml(other_perm="PUB"), "utf-8")

    async def granted() -> bool:
        try:
            await send_one(namesrv, "granted", APP, OTHER)
        except SendFailedError:
            return False
        return True

    await wait_until(granted, timeout=15, what="the edited plain_acl.yml in force")

    # A malformed edit is logged and ignored: the last good accounts stay in force.
    acl_file.write_text("accounts: [\n  - accessKey: broken", "utf-8")
    await wait_until(
        lambda: "acl files not reloaded" in broker.proc.stderr_path.read_text("utf-8", "replace"),
        timeout=15,
        what="the broker noticing the malformed file",
    )
    await send_one(namesrv, "still", APP, OTHER)
    assert await refusal_of(namesrv, "wrong2", wrong, TOPIC) == (
        "Check signature failed for accessKey=app_user1"
    )
    assert broker.proc.running


async def test_mqadmin_signs_with_tools_yml_and_edits_the_acl(
    start_process: StartProcess,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(acl_yaml(), "utf-8")
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(
        start_process, tmp_path, namesrv, aclEnable=True, aclPlainFile=str(acl_file)
    )
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    tools = home / "conf" / "tools.yml"
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))

    async def mqadmin(creds: SessionCredentials | None, *args: str) -> tuple[int, str, str]:
        """``mqadmin args[0] -n .. -b .. args[1:]`` signed with ``creds`` (None: unsigned)."""
        if creds is None:
            tools.unlink(missing_ok=True)
        else:
            tools.write_text(f"accessKey: {creds.access_key}\nsecretKey: {creds.secret_key}\n")
        capsys.readouterr()
        code = await asyncio.to_thread(main, [args[0], "-n", namesrv, "-b", broker.addr, *args[1:]])
        out, err = capsys.readouterr()
        return code, out, err

    # tools.yml: unsigned and non-admin are refused an admin command, the admin is not.
    code, _out, err = await mqadmin(None, "updateTopic", "-t", "NewTopic")
    assert code == 1 and "No accessKey is configured" in err
    code, _out, err = await mqadmin(APP, "updateTopic", "-t", "NewTopic")
    assert code == 1 and "Need admin permission for request code=17" in err
    code, _out, err = await mqadmin(ADMIN, "updateTopic", "-t", "NewTopic")
    assert code == 0, err

    newcomer = SessionCredentials("newuser01", "newsecret1")
    code, out, err = await mqadmin(
        ADMIN, "updateAclConfig", "-a", newcomer.access_key, "-s", newcomer.secret_key,
        "-i", "DENY", "-u", "SUB", "-t", "NewTopic=PUB",
    )  # fmt: skip
    assert code == 0, err
    assert out == f"create or update plain access config to {broker.addr} success.\n"
    await send_one(namesrv, "newcomer", newcomer, "NewTopic")  # in force at once
    assert "newuser01" in await asyncio.to_thread(acl_file.read_text, "utf-8")

    code, out, err = await mqadmin(ADMIN, "clusterAclConfigVersion", "--json")
    assert code == 0, err
    (row,) = [r for r in json.loads(out) if r["aclFilePath"] == str(acl_file)]
    assert (row["brokerAddr"], row["counter"]) == (broker.addr, 1)
    code, out, err = await mqadmin(ADMIN, "clusterAclConfigVersion")
    assert code == 0, err
    assert out.splitlines()[0].split()[:3] == ["#Cluster", "Name", "#Broker"]
    assert str(acl_file) in out

    # Refusals: a malformed permission (nothing written), a non-admin account.
    code, _out, err = await mqadmin(ADMIN, "updateAclConfig", "-a", "newuser01", "-t", "Bad")
    assert code == 1 and "CODE: 209" in err and "Parse resource permission failed" in err
    code, _out, err = await mqadmin(APP, "updateAclConfig", "-a", "sneaky01", "-s", "sneaky001")
    assert code == 1 and "Need admin permission for request code=50" in err

    code, out, err = await mqadmin(ADMIN, "deleteAclConfig", "-a", newcomer.access_key)
    assert code == 0, err
    assert out.startswith(f"delete plain access config account from {broker.addr} success.")
    assert await refusal_of(namesrv, "gone", newcomer, "NewTopic") == "No acl config for newuser01"
    code, _out, err = await mqadmin(ADMIN, "deleteAclConfig", "-a", newcomer.access_key)
    assert code == 1 and "CODE: 210" in err

    code, out, err = await mqadmin(ADMIN, "updateGlobalWhiteAddr", "-g", "127.0.0.1", "--json")
    assert code == 0, err
    assert json.loads(out) == {"globalWhiteAddrs": "127.0.0.1", "updated": [broker.addr]}
    white = await raw_request(broker.addr, "127.0.0.1")
    assert white.code == ResponseCode.SUCCESS, white.remark


async def test_acl_requests_without_acl_are_refused_clearly(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path) as broker:
        client = RemotingClient()
        try:
            for code in (RequestCode.DELETE_ACL_CONFIG, RequestCode.GET_BROKER_CLUSTER_ACL_INFO):
                request = RemotingCommand.request(code, {"accessKey": "someone1"})
                reply = await client.invoke(broker.listen_address, request, 5000)
                assert (reply.code, reply.remark) == (
                    ResponseCode.SYSTEM_ERROR,
                    "The broker does not enable acl",
                )
        finally:
            await client.close()
