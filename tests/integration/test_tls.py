"""TLS against real ``mqnamesrv`` and ``mqbroker`` processes.

- Enforcing: a name server, a master and its slave all with ``tls.server.mode=
  enforcing`` and CA-signed certificates (the slave's HA client, registration and
  config sync use TLS too, since BrokerStartup turns ``useTLS`` on in that mode).
  Our producer, pull consumer and push consumer verify the chain and produce and
  consume every key; a plaintext client is refused with a typed error at once;
  the slave's CommitLog catches up with the master's over the encrypted HA stream
  (HA is enforcing too, so a plaintext HA session could not replicate anything).
- Permissive (Java's default mode, test-mode self-signed certificate, settings
  given through ``tls.config.file``): a TLS and a plaintext client on one port.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.common.message import Message
from aiorocketmq.common.properties_file import format_properties
from aiorocketmq.common.route import KVTable, TopicRouteData
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.errors import RemotingConnectError, RemotingSendRequestError
from aiorocketmq.remoting.tls import TlsConfig
from tests.support.cluster import BROKER_READY, NAMESRV_READY, broker_properties
from tests.support.consume import pull_keys, push_keys
from tests.support.procs import ManagedProcess
from tests.support.tls_certs import Certs, make_certs
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]
TOPIC = "TlsTopic"


def _server_tls(certs: Certs) -> dict[str, Any]:
    return {
        "tls.server.mode": "enforcing",
        "tls.test.mode.enable": "false",
        "tls.server.certPath": str(certs.server_cert),
        "tls.server.keyPath": str(certs.server_key),
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": str(certs.ca),
    }


def _client_tls(certs: Certs) -> TlsConfig:
    return TlsConfig(client_auth_server=True, client_trust_cert_path=str(certs.ca))


async def _request(addr: str, request: RemotingCommand, tls: TlsConfig | None) -> RemotingCommand:
    config = RemotingClientConfig(use_tls=tls is not None, tls=tls or TlsConfig())
    client = RemotingClient(config)
    try:
        return await client.invoke(addr, request, 5000)
    finally:
        await client.close()


async def _route(namesrv: str, tls: TlsConfig | None) -> TopicRouteData | None:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    reply = await _request(namesrv, request, tls)
    return TopicRouteData.decode(reply.body) if reply.code == ResponseCode.SUCCESS else None


async def _max_offset(addr: str, tls: TlsConfig) -> int:
    reply = await _request(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO), tls)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return int(KVTable.decode(reply.body).table["commitLogMaxOffset"])


async def _start_namesrv(
    start_process: StartProcess, tmp_path: Path, settings: dict[str, Any]
) -> str:
    config = tmp_path / "namesrv.properties"
    config.write_text(format_properties(list(settings.items())), "utf-8")
    proc = start_process(
        [
            "-m",
            "aiorocketmq.cli.namesrv",
            "-c",
            str(config),
            "--listenPort",
            "0",
            "--bindAddress",
            "127.0.0.1",
        ],
        name="namesrv-tls",
        ready=NAMESRV_READY,
        wait=False,
        env={"HOME": str(tmp_path)},
    )
    return str((await proc.wait_ready_async())["addr"])


async def _start_broker(
    start_process: StartProcess, tmp_path: Path, namesrv: str, broker_id: int, certs: Certs
) -> str:
    role = {"brokerRole": "SLAVE", "brokerId": 1} if broker_id else {"brokerRole": "SYNC_MASTER"}
    settings = {**_server_tls(certs), **role, "haSendHeartbeatInterval": 1000}
    config = broker_properties(tmp_path / f"b{broker_id}", "broker-tls", namesrv, **settings)
    proc = start_process(
        ["-m", "aiorocketmq.cli.broker", "-c", str(config)],
        name=f"broker-tls-{broker_id}",
        ready=BROKER_READY,
        wait=False,
        env={"HOME": str(tmp_path)},
    )
    addr = str((await proc.wait_ready_async())["addr"])

    async def registered() -> bool:
        route = await _route(namesrv, _client_tls(certs))
        return route is not None and any(
            addr in bd.broker_addrs.values() for bd in route.broker_datas
        )

    await wait_until(registered, timeout=15, what=f"{addr} registered over TLS")
    return addr


async def _produce(config: ClientConfig, keys: list[str]) -> None:
    async with Producer("PG-tls", client_config=config) as producer:
        batch = [Message(TOPIC, b"x" * 64, properties={"KEYS": k, "TAGS": "T"}) for k in keys]
        for start in range(0, len(batch), 100):
            await producer.send_batch(batch[start : start + 100])


async def test_enforcing_cluster_produces_consumes_and_replicates_over_tls(
    start_process: StartProcess, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path / "certs")
    namesrv = await _start_namesrv(start_process, tmp_path, _server_tls(certs))
    master = await _start_broker(start_process, tmp_path, namesrv, 0, certs)
    slave = await _start_broker(start_process, tmp_path, namesrv, 1, certs)
    client = ClientConfig(
        namesrv_addr=namesrv,
        client_ip="127.0.0.1",
        instance_name="tls",
        use_tls=True,
        tls=_client_tls(certs),
    )
    keys = [f"k{i}" for i in range(2000)]
    await _produce(client, keys)  # SYNC_MASTER: each send waited for the slave's ack
    assert await pull_keys(client, "CG-tls-pull", TOPIC, len(keys)) == Counter(keys)
    assert await push_keys(client, "CG-tls-push", TOPIC, len(keys)) == Counter(keys)

    target = await _max_offset(master, _client_tls(certs))

    async def replicated() -> bool:
        return await _max_offset(slave, _client_tls(certs)) == target

    await wait_until(replicated, timeout=30, what=f"slave at master offset {target}")

    # Plaintext is refused on the name server and on the broker, with a typed error.
    for addr in (namesrv, master):
        with pytest.raises(RemotingSendRequestError):
            await asyncio.wait_for(_route(addr, None), 10)


async def test_permissive_test_mode_serves_tls_and_plaintext_on_one_port(
    start_process: StartProcess, tmp_path: Path
) -> None:
    tls_file = tmp_path / "tls.properties"
    tls_file.write_text("tls.server.mode=permissive\ntls.test.mode.enable=true\n", "utf-8")
    namesrv = await _start_namesrv(start_process, tmp_path, {"tls.config.file": str(tls_file)})
    assert await _route(namesrv, TlsConfig()) is None  # TLS: no broker, so no route
    assert await _route(namesrv, None) is None  # plaintext on the same port
    # A client that verifies the chain rejects the throw-away certificate.
    strict = TlsConfig(client_auth_server=True)
    with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        await _route(namesrv, strict)
