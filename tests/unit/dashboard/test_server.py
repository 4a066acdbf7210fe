"""The dashboard server's routing and errors, over real sockets, with no cluster
(the name server address points at a closed port): bad input never reaches the
network and gets a 4xx page; an unreachable cluster is a 502 page, not a traceback.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator

import pytest

from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.cli.admin import build_parser, main
from aiorocketmq.dashboard.server import DashboardServer

pytestmark = pytest.mark.timeout(30)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def server() -> AsyncIterator[DashboardServer]:
    admin = MQAdmin(f"127.0.0.1:{_closed_port()}", timeout_ms=1000)
    dash = DashboardServer(admin, sample_interval_s=0)
    await dash.start("127.0.0.1", 0)
    yield dash
    await dash.shutdown()
    await dash.shutdown()  # idempotent
    await admin.close()


async def http(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    raw = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


async def get(port: int, target: str) -> tuple[int, dict[str, str], bytes]:
    return await http(port, f"GET {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


@pytest.mark.parametrize(
    ("target", "status", "words"),
    [
        ("/topic", 400, "parameter is required"),
        ("/topic?topic=a%20b", 400, "topic contains illegal characters"),
        ("/group?group=x/y", 400, "group[x/y] contains illegal characters"),
        ("/messages?msgId=nothex", 400, "malformed message id"),
        ("/messages?key=k", 400, "needs the topic"),
        ("/nope", 404, "no such page"),
    ],
)
async def test_bad_input_is_a_4xx_page(
    server: DashboardServer, target: str, status: int, words: str
) -> None:
    code, headers, body = await get(server.port, target)
    assert code == status
    assert headers["Content-Type"].startswith("text/html")
    assert words in body.decode() and "Traceback" not in body.decode()
    code, headers, body = await get(server.port, "/api" + target)
    assert code == status and headers["Content-Type"] == "application/json"
    assert words in json.loads(body)["error"]


async def test_unreachable_cluster_is_a_502_page(server: DashboardServer) -> None:
    code, _, body = await get(server.port, "/")
    assert code == 502 and "the cluster did not answer" in body.decode()


async def test_read_only_and_malformed_requests(server: DashboardServer) -> None:
    code, _, _ = await http(server.port, b"POST /topics HTTP/1.1\r\n\r\n")
    assert code == 405
    code, _, _ = await http(server.port, b"garbage\r\n\r\n")
    assert code == 400
    code, headers, body = await http(server.port, b"HEAD /nope HTTP/1.1\r\n\r\n")
    assert code == 404 and body == b"" and int(headers["Content-Length"]) > 0


async def test_empty_messages_page_and_chart_need_no_cluster(server: DashboardServer) -> None:
    code, _, body = await get(server.port, "/messages")
    assert code == 200 and 'id="by-key"' in body.decode() and 'id="found"' not in body.decode()
    code, headers, body = await get(server.port, "/chart.svg")
    assert code == 200 and headers["Content-Type"] == "image/svg+xml"
    code, _, body = await get(server.port, "/api/tps")
    assert json.loads(body) == {"series": [], "samples": []}


def test_cli_parses_the_dashboard_command() -> None:
    args = build_parser().parse_args(["dashboard", "-n", "127.0.0.1:9876", "--port", "0"])
    assert (args.command, args.host, args.port, args.namesrvAddr) == (
        "dashboard", "127.0.0.1", 0, "127.0.0.1:9876",
    )  # fmt: skip
    assert build_parser().parse_args(["dashboard"]).port == 8080


def test_cli_dashboard_errors_exit_without_serving(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    assert main(["dashboard", "--port", "0"]) == 1
    assert "no name server address" in capsys.readouterr().err
    assert main(["dashboard", "-n", "127.0.0.1:9876", "--port", "70000"]) == 2
    assert "--port out of range" in capsys.readouterr().err
