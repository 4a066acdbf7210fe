"""The broker's VIP channel: ``listenPort - 2`` answers what the main port answers.

A Java client with ``vipChannelEnabled=true`` (and rocketmq-dashboard, whose
``isVIPChannel`` is true by default) sends to ``MixAll.brokerVIPChannel``: the
route's broker address with its port minus 2. This test does exactly that on the
wire, with a frame laid out as Java's ``RemotingCommand`` writes it (JSON header,
every extField a string), against a real ``mqbroker``; then the same requests on both
ports get the same answers, and a message sent through the VIP port is pulled from
the main one.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.common.route import KVTable
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.cluster import broker_request, start_broker, start_namesrv, wait_route
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(60)

StartProcess = Callable[..., ManagedProcess]

JAVA_VERSION_4_9_4 = 393  # MQVersion.Version.V4_9_4.ordinal()


def java_frame(code: int, opaque: int, ext_fields: dict[str, str], body: bytes = b"") -> bytes:
    """A request as Java's ``RemotingCommand.encodeHeader`` + body lays it out (JSON)."""
    header = json.dumps(
        {
            "code": code,
            "extFields": ext_fields,
            "flag": 0,
            "language": "JAVA",
            "opaque": opaque,
            "serializeTypeCurrentRPC": "JSON",
            "version": JAVA_VERSION_4_9_4,
        },
        separators=(",", ":"),
    ).encode()
    # length = 4 (header length) + header + body; the header length's high byte is
    # the serialize type (0 = JSON).
    return struct.pack(">II", 4 + len(header) + len(body), len(header)) + header + body


async def java_request(address: str, frame: bytes) -> tuple[dict[str, Any], bytes]:
    """Send one frame on a fresh socket and read one reply: (JSON header, body)."""
    host, port = address.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(frame)
        await writer.drain()
        async with asyncio.timeout(10):
            total, header_word = struct.unpack(">II", await reader.readexactly(8))
            assert header_word >> 24 == 0, "a JSON request gets a JSON reply"
            header_len = header_word & 0xFFFFFF
            header = json.loads(await reader.readexactly(header_len))
            body = await reader.readexactly(total - 4 - header_len)
    finally:
        writer.close()
        await writer.wait_closed()
    return header, body


async def _equals(value: Awaitable[str], expected: str) -> bool:
    return await value == expected


def vip_channel(address: str) -> str:
    """Java's ``MixAll.brokerVIPChannel(true, brokerAddr)``."""
    host, port = address.rsplit(":", 1)
    return f"{host}:{int(port) - 2}"


async def test_vip_channel_serves_a_java_client_with_vip_enabled(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, "broker-a")
    route = await wait_route(namesrv, "TBW102")
    main = route.broker_datas[0].broker_addrs[0]
    assert main == broker.addr
    vip = vip_channel(main)

    properties = "KEYS\x01vip-key\x02TAGS\x01TagA\x02WAIT\x01true\x02"
    send = java_frame(
        RequestCode.SEND_MESSAGE_V2,
        1,
        {
            "a": "PG-java",  # producerGroup
            "b": "VipTopic",  # topic (auto-created from TBW102)
            "c": "TBW102",
            "d": "4",
            "e": "0",  # queueId
            "f": "0",  # sysFlag
            "g": str(int(time.time() * 1000)),
            "h": "0",
            "i": properties,
            "j": "0",
            "k": "false",
            "m": "false",
        },
        b"through the VIP channel",
    )
    header, _ = await java_request(vip, send)
    assert header["code"] == ResponseCode.SUCCESS, header.get("remark")
    assert header["opaque"] == 1 and header["flag"] & 1  # a response to our opaque
    fields = header["extFields"]
    assert fields["queueId"] == "0" and fields["queueOffset"] == "0"
    assert fields["msgId"]

    # The same requests on both ports, the same answers (once the message is
    # dispatched to its ConsumeQueue: that happens after the reply).
    async def max_offset(address: str) -> str:
        request = RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, {"topic": "VipTopic", "queueId": "0"}
        )
        return str((await broker_request(address, request)).ext_fields["offset"])

    await wait_until(
        lambda: _equals(max_offset(main), "1"), timeout=10, what="the message dispatched"
    )
    answers = []
    for address in (main, vip):
        info = await broker_request(
            address, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        )
        table = KVTable.decode(info.body).table
        answers.append((await max_offset(address), table["brokerVersionDesc"]))
    assert answers[0] == answers[1] == ("1", answers[0][1])

    # A pull on the VIP port returns the message sent there (Java 4.9 serves pulls
    # on the main port only; this broker serves every request on both).
    client = RemotingClient()
    try:
        for address in (vip, main):
            pull = RemotingCommand.request(
                RequestCode.PULL_MESSAGE,
                {
                    "consumerGroup": "CG-java",
                    "topic": "VipTopic",
                    "queueId": "0",
                    "queueOffset": "0",
                    "maxMsgNums": "32",
                    "sysFlag": "4",  # SUBSCRIPTION: the expression travels with the pull
                    "commitOffset": "0",
                    "suspendTimeoutMillis": "0",
                    "subscription": "*",
                    "subVersion": "0",
                },
            )
            reply = await client.invoke(address, pull, 5000)
            assert reply.code == ResponseCode.SUCCESS, (address, reply.remark)
            assert b"through the VIP channel" in (reply.body or b"")
    finally:
        await client.close()


async def test_vip_port_is_listen_port_minus_2_with_a_fixed_port(
    start_process: StartProcess, tmp_path: Path
) -> None:
    # A fixed listenPort: find one whose -2 neighbour and +1 (HA) are free by binding
    # port 0 first is racy, so let the broker choose with 0, stop it, and restart it
    # on the very port it had (the VIP port it had is then free again too).
    _, namesrv = await start_namesrv(start_process, tmp_path)
    first = await start_broker(start_process, tmp_path, namesrv, "broker-a")
    port = int(first.addr.rsplit(":", 1)[1])
    assert await asyncio.to_thread(first.proc.stop) == 0
    second = await start_broker(
        start_process, tmp_path / "again", namesrv, "broker-a", listenPort=port, haListenPort=0
    )
    assert second.addr.endswith(f":{port}")
    header, _ = await java_request(
        vip_channel(second.addr), java_frame(RequestCode.GET_BROKER_RUNTIME_INFO, 7, {})
    )
    assert header["code"] == ResponseCode.SUCCESS and header["opaque"] == 7
