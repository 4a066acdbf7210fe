"""GET_CONSUMER_RUNNING_INFO (307): the broker asks one consumer client and relays its answer.

Java's ``AdminBrokerProcessor.callConsumer``: find the client's connection in the
group (SYSTEM_ERROR ``The Consumer <g> <c> not online`` when it has none), refuse
clients older than V3_1_8_SNAPSHOT, send the request on as it came (its extFields
and body) and return whatever the client answers: the ``ConsumerRunningInfo`` body,
or its own error. A client that does not answer within 10 s gives
CONSUME_MSG_TIMEOUT; a broken connection SYSTEM_ERROR.

Must not: read the body (the admin tool does) or keep state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.remoting.broker_admin_headers import GetConsumerRunningInfoRequestHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import RemotingError, RemotingTimeoutError

__all__ = ["CALL_CLIENT_TIMEOUT_S", "MIN_RUNNING_INFO_VERSION", "ConsumerRelayProcessor"]

log = logging.getLogger(__name__)

#: ``MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()``.
MIN_RUNNING_INFO_VERSION: Final = 62
#: ``Broker2Client.callClient``'s 10 s.
CALL_CLIENT_TIMEOUT_S: Final = 10.0

#: ``RemotingServer.invoke`` bound: (connection, request, timeout s) -> reply.
ClientCaller = Callable[[RemotingConnection, RemotingCommand, float], Awaitable[RemotingCommand]]


class ConsumerRelayProcessor:
    """Relays GET_CONSUMER_RUNNING_INFO to the named client (module docstring)."""

    def __init__(self, ctx: BrokerContext, call_client: ClientCaller) -> None:
        self._ctx = ctx
        self._call = call_client

    def register(self, table: ProcessorTable) -> None:
        """Route code 307 here."""
        table.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_consumer_running_info)

    async def get_consumer_running_info(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """Ask the client; its reply, or why it could not be asked."""
        header = GetConsumerRunningInfoRequestHeader.from_ext_fields(request.ext_fields)
        group, client_id = header.consumer_group, header.client_id
        info = self._ctx.consumers.get_group(group)
        channel = None
        if info is not None:
            channel = next((c for c in info.channels.values() if c.client_id == client_id), None)
        if channel is None or not isinstance(channel.channel, RemotingConnection):
            return request.response_to(
                ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        if channel.version < MIN_RUNNING_INFO_VERSION:
            return request.response_to(
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{client_id}> Version <{channel.version}> too low to finish, "
                "please upgrade it to V3_1_8_SNAPSHOT",
            )
        relayed = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, dict(request.ext_fields), request.body
        )
        try:
            reply = await self._call(channel.channel, relayed, CALL_CLIENT_TIMEOUT_S)
        except RemotingTimeoutError as exc:
            return request.response_to(
                ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}"
            )
        except RemotingError as exc:
            log.warning("running info of %s in %s failed: %s", client_id, group, exc)
            return request.response_to(
                ResponseCode.SYSTEM_ERROR,
                f"invoke consumer <{group}> <{client_id}> Exception: {exc}",
            )
        return request.response_to(reply.code, reply.remark, None, reply.body)
