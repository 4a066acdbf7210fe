"""TLS on the remoting server and client: settings, the peeking acceptor, certificates.

Servers and clients are real, on 127.0.0.1 ephemeral ports, in this process.
Certificates come from the ``openssl`` command line (``tests/support/tls_certs``);
the permissive server runs in test mode (a self-signed certificate made on the fly).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.broker.config import load_broker_settings
from aiorocketmq.broker.ha.service import HAService
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.common.settings import ConfigError
from aiorocketmq.namesrv.config import load_namesrv_config
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig, RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
)
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from aiorocketmq.remoting.server import RemotingServer
from aiorocketmq.remoting.tls import (
    TlsConfig,
    TlsConfigError,
    TlsMode,
    build_client_context,
    build_server_context,
    tls_config_from_properties,
    tls_file_properties,
)
from aiorocketmq.remoting.tls_listener import TlsServer
from tests.support.tls_certs import KEY_PASSWORD, Certs, make_certs
from tests.support.wait import wait_until
from tests.unit.ha.ha_support import (
    HAPair,
    commit_log_files,
    master_config,
    put_many,
    slave_config,
)
from tests.unit.store.store_support import open_store

ECHO = 1001
SHORT_S = 0.3  # handshake / first-byte timeout of the servers here


def _echo(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    return request.response_to(ResponseCode.SUCCESS, remark="echo", body=bytes(request.body))


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    started: list[RemotingServer | RemotingClient] = []

    async def start(tls: TlsConfig) -> RemotingServer:
        table = ProcessorTable()
        table.register(ECHO, _echo)
        config = RemotingServerConfig(listen_host="127.0.0.1", listen_port=0, tls=tls)
        server = RemotingServer(table, config, name="tls-test")
        await server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        await server.shutdown()


def _tls_server(server: RemotingServer) -> TlsServer:
    listener = server._server
    assert isinstance(listener, TlsServer)
    return listener


async def _call(address: str, **client: Any) -> RemotingCommand:
    remoting = RemotingClient(RemotingClientConfig(connect_timeout_millis=3000, **client))
    try:
        return await remoting.invoke(address, RemotingCommand.request(ECHO), 3000)
    finally:
        await remoting.close()


def _server_tls(certs: Certs, **more: Any) -> TlsConfig:
    values: dict[str, Any] = {
        "server_mode": TlsMode.ENFORCING,
        "server_cert_path": str(certs.server_cert),
        "server_key_path": str(certs.server_key),
        "handshake_timeout_millis": int(SHORT_S * 1000),
    }
    return TlsConfig(**{**values, **more})


# -- settings ---------------------------------------------------------------------------


def test_settings_use_java_names_and_reject_bad_values(tmp_path: Path) -> None:
    tls = tls_config_from_properties(
        {"tls.server.mode": "Enforcing", "tls.server.need.client.auth": "REQUIRE", "x": "1"}
    )
    assert tls.server_mode is TlsMode.ENFORCING
    assert tls.server_need_client_auth.value == "require"
    assert TlsConfig().server_mode is TlsMode.DISABLED  # our default; module docstring says why
    with pytest.raises(ConfigError, match=r"tls\.server\.mode"):
        tls_config_from_properties({"tls.server.mode": "strict"})
    # tls.config.file: its keys win over the main file's, other keys are left alone.
    extra = tmp_path / "tls.properties"
    extra.write_text("tls.server.mode=permissive\ntls.test.mode.enable=false\nlistenPort=1\n")
    merged = tls_file_properties({"tls.config.file": str(extra), "tls.server.mode": "enforcing"})
    assert merged["tls.server.mode"] == "permissive"
    assert merged["tls.test.mode.enable"] == "false"
    assert "listenPort" not in merged
    assert tls_file_properties({"tls.config.file": str(tmp_path / "none")}) == {
        "tls.config.file": str(tmp_path / "none")
    }


def test_loaders_split_tls_keys_and_derive_use_tls() -> None:
    settings = load_broker_settings({"tls.server.mode": "enforcing", "brokerName": "b"})
    assert settings.remoting.tls.server_mode is TlsMode.ENFORCING
    assert settings.client.use_tls  # BrokerStartup: tls.enable unset -> mode == enforcing
    assert not settings.unknown_keys
    assert "tls.server.mode" not in dict(settings.items())  # not printed, as Java
    explicit = load_broker_settings({"tls.server.mode": "enforcing", "tls.enable": "false"})
    assert not explicit.client.use_tls
    assert not load_broker_settings({"tls.server.mode": "permissive"}).client.use_tls
    _, remoting, unknown = load_namesrv_config(
        {"tls.server.mode": "permissive", "tls.server.certPath": "/c.pem"}
    )
    assert remoting.tls.server_mode is TlsMode.PERMISSIVE
    assert remoting.tls.server_cert_path == "/c.pem"
    assert unknown == []


def test_client_config_use_tls_reaches_the_remoting_client() -> None:
    tls = TlsConfig(client_auth_server=True, client_trust_cert_path="/ca.pem")
    config = ClientConfig(namesrv_addr="127.0.0.1:9876", use_tls=True, tls=tls)
    assert config.remoting.use_tls
    assert config.remoting.tls.client_trust_cert_path == "/ca.pem"
    assert not ClientConfig(namesrv_addr="127.0.0.1:9876").remoting.use_tls


def test_context_errors_name_the_setting(certs: Certs, tmp_path: Path) -> None:
    with pytest.raises(TlsConfigError, match=r"tls\.server\.certPath is required"):
        build_server_context(TlsConfig(test_mode_enable=False))
    with pytest.raises(TlsConfigError, match=r"tls\.server\.trustCertPath"):
        build_server_context(_server_tls(certs, server_need_client_auth="require"))
    with pytest.raises(TlsConfigError, match=r"tls\.server\.certPath="):
        build_server_context(TlsConfig(server_cert_path=str(tmp_path / "missing.pem")))
    with pytest.raises(TlsConfigError, match=r"tls\.client\.trustCertPath"):
        build_client_context(
            TlsConfig(client_auth_server=True, client_trust_cert_path=str(tmp_path / "x"))
        )
    wrong = _server_tls(certs, server_key_path=str(certs.server_key_encrypted))
    with pytest.raises(TlsConfigError):
        build_server_context(wrong.model_copy(update={"server_key_password": "wrong"}))
    context = build_server_context(wrong.model_copy(update={"server_key_password": KEY_PASSWORD}))
    assert isinstance(context, ssl.SSLContext)


# -- modes --------------------------------------------------------------------------------


async def test_permissive_serves_tls_and_plaintext_on_one_port(serve: Any) -> None:
    # Test mode (no certPath): a self-signed certificate, as Java's default.
    server = await serve(TlsConfig(server_mode=TlsMode.PERMISSIVE))
    assert (await _call(server.address, use_tls=True)).remark == "echo"
    assert (await _call(server.address)).remark == "echo"
    listener = _tls_server(server)
    assert (listener.tls_accepted, listener.plain_accepted, listener.refused) == (1, 1, 0)


async def test_enforcing_refuses_plaintext_with_a_typed_error(serve: Any, certs: Certs) -> None:
    server = await serve(_server_tls(certs))
    with pytest.raises(RemotingSendRequestError):
        await asyncio.wait_for(_call(server.address), 5)
    assert _tls_server(server).refused == 1
    assert (await _call(server.address, use_tls=True)).remark == "echo"


async def test_disabled_server_refuses_a_tls_client(serve: Any) -> None:
    server = await serve(TlsConfig())  # the plain create_server path
    assert not isinstance(server._server, TlsServer)
    with pytest.raises(RemotingConnectError):
        await asyncio.wait_for(_call(server.address, use_tls=True), 5)
    assert (await _call(server.address)).remark == "echo"


async def test_client_verifies_the_server_chain(serve: Any, certs: Certs) -> None:
    server = await serve(_server_tls(certs))
    trusted = TlsConfig(client_auth_server=True, client_trust_cert_path=str(certs.ca))
    assert (await _call(server.address, use_tls=True, tls=trusted)).remark == "echo"
    other = trusted.model_copy(update={"client_trust_cert_path": str(certs.other_ca)})
    with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        await _call(server.address, use_tls=True, tls=other)


async def test_required_client_certificate(serve: Any, certs: Certs) -> None:
    tls = _server_tls(
        certs, server_need_client_auth="require", server_trust_cert_path=str(certs.ca)
    )
    server = await serve(tls)
    own = TlsConfig(client_cert_path=str(certs.client_cert), client_key_path=str(certs.client_key))
    assert (await _call(server.address, use_tls=True, tls=own)).remark == "echo"
    # TLS 1.3: the client may finish its side first; either way it gets a typed error.
    with pytest.raises((RemotingConnectError, RemotingSendRequestError)):
        await asyncio.wait_for(_call(server.address, use_tls=True), 5)


# -- the first-byte peek --------------------------------------------------------------------


async def test_silent_peer_is_closed_and_does_not_block_accepting(serve: Any) -> None:
    server = await serve(
        TlsConfig(server_mode=TlsMode.PERMISSIVE, handshake_timeout_millis=int(SHORT_S * 1000))
    )
    listener = _tls_server(server)
    host, port = server.host, server.port
    idle = [await asyncio.open_connection(host, port) for _ in range(3)]
    await wait_until(lambda: listener.pending_count == 3, timeout=5, what="3 peeks pending")
    # Others are served while the silent ones wait.
    assert (await _call(server.address)).remark == "echo"
    assert (await _call(server.address, use_tls=True)).remark == "echo"
    for reader, writer in idle:
        assert await asyncio.wait_for(reader.read(1), 5) == b""  # closed by the server
        writer.close()
    assert listener.refused == 3
    assert listener.pending_count == 0


async def test_tls_record_start_then_silence_hits_the_handshake_timeout(serve: Any) -> None:
    server = await serve(
        TlsConfig(server_mode=TlsMode.PERMISSIVE, handshake_timeout_millis=int(SHORT_S * 1000))
    )
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(b"\x16\x03\x01")
    assert await asyncio.wait_for(reader.read(1), 5) == b""
    writer.close()
    await wait_until(lambda: _tls_server(server).refused == 1, timeout=5, what="one refusal")


async def test_plaintext_peer_sending_one_byte_at_a_time(serve: Any) -> None:
    server = await serve(TlsConfig(server_mode=TlsMode.PERMISSIVE))
    reader, writer = await asyncio.open_connection(server.host, server.port)
    request = RemotingCommand.request(ECHO)
    request.opaque = 7
    for byte in encode_frame(request):
        writer.write(bytes([byte]))
        await writer.drain()
    decoder = FrameDecoder()
    replies: list[RemotingCommand] = []
    while not replies:
        data = await asyncio.wait_for(reader.read(65536), 5)
        assert data, "server closed the connection"
        replies.extend(decoder.feed(data))
    assert replies[0].opaque == 7 and replies[0].remark == "echo"
    writer.close()


async def test_tls_peer_sending_one_byte_at_a_time(serve: Any) -> None:
    server = await serve(TlsConfig(server_mode=TlsMode.PERMISSIVE))
    reader, writer = await asyncio.open_connection(server.host, server.port)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = build_client_context(TlsConfig()).wrap_bio(incoming, outgoing)

    async def flush_bytewise() -> None:
        for byte in outgoing.read():
            writer.write(bytes([byte]))
            await writer.drain()

    async def feed() -> None:
        data = await asyncio.wait_for(reader.read(65536), 5)
        assert data, "server closed the connection"
        incoming.write(data)

    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            await flush_bytewise()
            await feed()
    request = RemotingCommand.request(ECHO)
    request.opaque = 9
    tls.write(encode_frame(request))
    await flush_bytewise()
    decoder, replies = FrameDecoder(), []
    while not replies:
        try:
            replies.extend(decoder.feed(tls.read(65536)))
        except ssl.SSLWantReadError:
            await feed()
    assert replies[0].opaque == 9 and replies[0].remark == "echo"
    writer.close()


async def test_server_shutdown_closes_pending_peeks(serve: Any) -> None:
    server = await serve(TlsConfig(server_mode=TlsMode.PERMISSIVE))
    listener = _tls_server(server)
    reader, writer = await asyncio.open_connection(server.host, server.port)
    await wait_until(lambda: listener.pending_count == 1, timeout=5, what="a pending peek")
    await server.shutdown()
    await listener.wait_closed()
    assert await asyncio.wait_for(reader.read(1), 5) == b""
    writer.close()
    with pytest.raises(RemotingError):
        await _call(server.address)


async def test_pending_limit_closes_new_connections_at_once() -> None:
    accepted: list[asyncio.BaseProtocol] = []

    def factory() -> asyncio.Protocol:
        protocol = asyncio.Protocol()
        accepted.append(protocol)
        return protocol

    context = build_server_context(TlsConfig())
    listener = TlsServer(
        factory, context, TlsMode.PERMISSIVE, handshake_timeout_s=5, name="t", max_pending=1
    )
    await listener.start("127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        first = await asyncio.open_connection("127.0.0.1", port)
        await wait_until(lambda: listener.pending_count == 1, timeout=5, what="one pending")
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(reader.read(1), 5) == b""  # over the limit: closed
        writer.close()
        assert listener.refused == 1 and listener.pending_count == 1
        first[1].write(b"\x00")  # the first one goes on as plaintext
        await wait_until(lambda: listener.plain_accepted == 1, timeout=5, what="hand-over")
        assert len(accepted) == 1
        first[1].close()
    finally:
        listener.close()
        await listener.wait_closed()
    assert listener.sockets == ()


@pytest.mark.parametrize("slave_uses_tls", [True, False], ids=["tls-slave", "plaintext-slave"])
async def test_ha_stream_over_a_permissive_listener(tmp_path: Path, slave_uses_tls: bool) -> None:
    # A plaintext slave is what a RocketMQ 4.9.8 slave is: its first report opens
    # with 0x00, so a permissive HA listener serves it as before.
    tls = TlsConfig(server_mode=TlsMode.PERMISSIVE)
    config = master_config(tmp_path)
    master = await open_store(config)
    master_ha = HAService(config, host="127.0.0.1", port=0, tls=tls)
    master_ha.install(master)
    await master_ha.start()
    config = slave_config(tmp_path)
    slave = await open_store(config)
    client_tls = tls if slave_uses_tls else None
    slave_ha = HAService(config, backoff_s=0.02, backoff_max_s=0.2, client_tls=client_tls)
    slave_ha.install(slave)
    slave_ha.update_master_address(f"127.0.0.1:{master_ha.ha_port}")
    await slave_ha.start()
    pair = HAPair(master, master_ha, slave, slave_ha)
    try:
        await pair.slave_requested()
        await put_many(master, 300)
        await pair.caught_up()
        assert commit_log_files(slave) == commit_log_files(master)
        assert master_ha.server is not None
        listener = master_ha.server._server
        assert isinstance(listener, TlsServer)
        assert (listener.tls_accepted, listener.plain_accepted) == (
            (1, 0) if slave_uses_tls else (0, 1)
        )
    finally:
        await pair.close()
