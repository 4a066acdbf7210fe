"""RemotingServer's extra ports (the broker's VIP channel) over loopback.

- Port 0: the main port P and P - 2 are bound together, and both serve the same
  processors (and count toward the same connections).
- A fixed port whose P - 2 is taken fails start with an error naming that port,
  and leaves nothing bound.
"""

from __future__ import annotations

import socket

import pytest

from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.remoting.server import RemotingServer


def _echo_table() -> ProcessorTable:
    table = ProcessorTable()
    table.register(900, lambda conn, request: request.response_to(ResponseCode.SUCCESS, "echo"))
    return table


def _free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


async def test_port_zero_binds_the_pair_and_both_serve() -> None:
    config = RemotingServerConfig(listen_host="127.0.0.1", listen_port=0)
    server = RemotingServer(_echo_table(), config, extra_port_offsets=(-2,))
    await server.start()
    client = RemotingClient()
    try:
        assert server.extra_ports == [server.port - 2]
        for port in (server.port, server.port - 2):
            reply = await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(900), 3000)
            assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, "echo")
        assert len(server.connections) == 2
    finally:
        await client.close()
        await server.shutdown()
    assert server.extra_ports == []


async def test_a_fixed_port_whose_neighbour_is_taken_fails_clearly() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        if not _free(busy + 2):
            pytest.skip(f"port {busy + 2} is in use by another program")
        config = RemotingServerConfig(listen_host="127.0.0.1", listen_port=busy + 2)
        server = RemotingServer(_echo_table(), config, name="broker", extra_port_offsets=(-2,))
        with pytest.raises(OSError, match=rf"cannot listen on {busy} \(listenPort-2\)"):
            await server.start()
    assert _free(busy + 2)  # the main port was released after the failure
