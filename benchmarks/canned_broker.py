"""``mqbroker`` whose plain sends are answered without the store: a benchmark's yardstick.

The real broker CLI, with one change made before it starts: a SEND_MESSAGE_V2 request
that is not a batch gets a stored reply at once (``SEND_OK``, a fresh msgId, queue
offsets counting up per queue), with no header parse, no checks, no put, no dispatch.
Every other request (topic creation, routes, heartbeats, batches) takes the real
processors. ``single_send_floor.py`` runs it beside the real broker: the gap between
the two is what the send handler and the store cost a single request; what is left
under it is our client, remoting and the event loop.

Never use it for anything but measuring: it acknowledges messages it does not keep.

Run: ``python benchmarks/canned_broker.py -c broker.properties`` (the ``mqbroker``
flags).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable

from aiorocketmq.broker.processors import send
from aiorocketmq.cli import broker
from aiorocketmq.common.constants import DEFAULT_REGION
from aiorocketmq.remoting.broker_headers import SendMessageResponseHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import RemotingConnection

_real_process = send.SendProcessor.process
_next_offsets: dict[str, int] = {}
_replies = [0]
_MSG_ID_PREFIX = "7F00000100002A9F"


def _canned(
    self: send.SendProcessor, conn: RemotingConnection, request: RemotingCommand
) -> RemotingCommand | Awaitable[RemotingCommand]:
    fields = request.ext_fields
    if request.code != RequestCode.SEND_MESSAGE_V2 or fields.get("m", "false") != "false":
        return _real_process(self, conn, request)
    queue_id = fields.get("e", "0")
    key = f"{fields.get('b')}-{queue_id}"
    offset = _next_offsets.get(key, 0)
    _next_offsets[key] = offset + 1
    _replies[0] += 1  # stands in for a physical offset: every msgId differs
    msg_id = f"{_MSG_ID_PREFIX}{_replies[0]:016X}"
    reply = SendMessageResponseHeader.stored_fields(msg_id, int(queue_id), offset, DEFAULT_REGION)
    return request.response_to(ResponseCode.SUCCESS, None, reply)


if __name__ == "__main__":
    send.SendProcessor.process = _canned  # type: ignore[method-assign]
    sys.exit(broker.main())
