"""A broker test double: registers with name servers, and answers a few client requests.

Owns: ``BrokerDouble``, what the name-server tests need from a broker until the
real one exists:

- registering (REGISTER_BROKER with a RegisterBrokerBody and its CRC, as a Java
  broker sends it) and unregistering, through its own ``RemotingClient`` so that
  closing that client's connection is "the broker's connection closed";
- optionally a ``RemotingServer`` on 127.0.0.1 port 0 whose address the double
  registers, answering SEND_MESSAGE / SEND_MESSAGE_V2 (an offset msgId, queue id,
  queue offset, all strings as the C++ client needs), HEART_BEAT and
  UNREGISTER_CLIENT, and recording every request, so a test can prove a stock
  client used the broker address it found in a route.

Must not: sleep, or pretend to store anything (it counts queue offsets only).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections import defaultdict

from aiorocketmq.common.msg_id import create_offset_msg_id
from aiorocketmq.common.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig, RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.namesrv_headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)
from aiorocketmq.remoting.server import RemotingServer

__all__ = ["BrokerDouble"]

REQUEST_TIMEOUT_MS = 5_000


class BrokerDouble:
    """A fake broker (see the module docstring).

    Args:
        broker_name: Shared by a master and its slaves.
        broker_id: 0 = master.
        topics: Topic name -> queue count (read = write).
        cluster: Cluster name.
        broker_addr: The address to register; None means "my server's address"
            (call ``serve()`` first) or a made-up one when not serving.
        first_queue_offset: The queueOffset the first send to each queue gets.
    """

    def __init__(
        self,
        broker_name: str = "broker-a",
        broker_id: int = 0,
        topics: dict[str, int] | None = None,
        cluster: str = "DefaultCluster",
        broker_addr: str | None = None,
        first_queue_offset: int = 0,
    ) -> None:
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.cluster = cluster
        self.topics = dict(topics if topics is not None else {"TopicTest": 4})
        self._broker_addr = broker_addr
        self.data_version = DataVersion(int(time.time() * 1000), 1)
        self.client = RemotingClient(RemotingClientConfig(serialize_type="JSON"))
        self.server: RemotingServer | None = None
        self.received: list[RemotingCommand] = []
        self.arrived: dict[int, asyncio.Event] = defaultdict(asyncio.Event)
        self._queue_offsets: dict[tuple[str, int], int] = defaultdict(lambda: first_queue_offset)

    @property
    def broker_addr(self) -> str:
        """The address this double registers."""
        if self._broker_addr is not None:
            return self._broker_addr
        if self.server is not None:
            return self.server.address
        return f"127.0.0.1:{10911 + 10 * self.broker_id}"

    @property
    def ha_server_addr(self) -> str:
        """``ip:listenPort+1``, RocketMQ's default HA port."""
        host, _, port = self.broker_addr.rpartition(":")
        return f"{host}:{int(port) + 1}"

    # -- name-server side ----------------------------------------------------------

    def body(self) -> RegisterBrokerBody:
        """The RegisterBrokerBody for the current topics and DataVersion."""
        table = {name: TopicConfig(name, n, n) for name, n in self.topics.items()}
        return RegisterBrokerBody(TopicConfigSerializeWrapper(table, self.data_version))

    def change_topics(self, topics: dict[str, int]) -> None:
        """Replace the topic table and move to the next DataVersion, as a broker does."""
        self.topics = dict(topics)
        self.data_version = self.data_version.next_version(int(time.time() * 1000))

    def register_request(self, compressed: bool = False) -> RemotingCommand:
        """The REGISTER_BROKER request a Java broker would send now."""
        body = self.body().encode(compressed)
        header = RegisterBrokerRequestHeader(
            broker_name=self.broker_name,
            broker_addr=self.broker_addr,
            cluster_name=self.cluster,
            ha_server_addr=self.ha_server_addr,
            broker_id=self.broker_id,
            compressed=compressed,
            body_crc32=zlib.crc32(body) & 0x7FFFFFFF,
        )
        return RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)

    async def register(
        self, namesrv_addr: str, compressed: bool = False
    ) -> RegisterBrokerResponseHeader:
        """Register with one name server; returns the reply's master/HA addresses."""
        reply = await self.client.invoke(
            namesrv_addr, self.register_request(compressed), REQUEST_TIMEOUT_MS
        )
        assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)
        return RegisterBrokerResponseHeader.from_ext_fields(reply.ext_fields)

    async def unregister(self, namesrv_addr: str) -> None:
        """Say goodbye to one name server (UNREGISTER_BROKER)."""
        header = UnRegisterBrokerRequestHeader(
            self.broker_name, self.broker_addr, self.cluster, self.broker_id
        )
        request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, header.to_ext_fields())
        reply = await self.client.invoke(namesrv_addr, request, REQUEST_TIMEOUT_MS)
        assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)

    def drop_connection(self, namesrv_addr: str) -> None:
        """Close the connection to one name server, as a crashed broker's would close."""
        self.client.close_connection(namesrv_addr)

    # -- client side ---------------------------------------------------------------

    async def serve(self) -> str:
        """Start the broker-side server on 127.0.0.1 port 0; returns its address."""
        table = ProcessorTable()
        table.register(RequestCode.SEND_MESSAGE, self._on_send)
        table.register(RequestCode.SEND_MESSAGE_V2, self._on_send)
        table.register(RequestCode.HEART_BEAT, self._on_ok)
        table.register(RequestCode.UNREGISTER_CLIENT, self._on_ok)
        config = RemotingServerConfig(listen_host="127.0.0.1", listen_port=0)
        self.server = RemotingServer(table, config, name=f"double-{self.broker_name}")
        await self.server.start()
        return self.server.address

    def _record(self, request: RemotingCommand) -> None:
        self.received.append(request)
        self.arrived[request.code].set()

    def _on_ok(self, _conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        self._record(request)
        return request.response_to(ResponseCode.SUCCESS)

    def _on_send(self, _conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        self._record(request)
        fields = request.ext_fields
        v2 = request.code == RequestCode.SEND_MESSAGE_V2
        topic = fields["b" if v2 else "topic"]
        queue_id = max(0, int(fields["e" if v2 else "queueId"]))
        offset = self._queue_offsets[(topic, queue_id)]
        self._queue_offsets[(topic, queue_id)] = offset + 1
        host, _, port = self.broker_addr.rpartition(":")
        ext = {
            "msgId": create_offset_msg_id(host, int(port), len(self.received) * 1000),
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "MSG_REGION": "DefaultRegion",
            "TRACE_ON": "true",
        }
        return request.response_to(ResponseCode.SUCCESS, ext_fields=ext)

    def sends(self) -> list[RemotingCommand]:
        """The SEND_MESSAGE / SEND_MESSAGE_V2 requests received so far."""
        codes = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
        return [r for r in self.received if r.code in codes]

    async def close(self) -> None:
        """Close the client and the server (idempotent)."""
        await self.client.close()
        if self.server is not None:
            await self.server.shutdown()
