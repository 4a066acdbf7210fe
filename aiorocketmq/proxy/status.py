"""The v2 protocol's in-band statuses: ``Status {code, message}`` and the error
that carries one out of a handler.

Owns: ``ProxyError`` (raised anywhere below an RPC handler, turned into the
response's ``status`` by the server), ``status()`` and the map from the store's
put statuses to v2 codes (RocketMQ 5's ``ResponseBuilder``).

Must not: know RPCs or messages.
"""

from __future__ import annotations

from typing import Final

from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.store.results import PutMessageStatus

__all__ = ["PUT_STATUS_CODES", "ProxyError", "status"]


class ProxyError(Exception):
    """A request that ends with ``code`` (never OK) and a message for the client."""

    def __init__(self, code: pb.Code, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: pb.Code = pb.Code.OK, message: str = "OK") -> pb.Status:
    """A ``Status``; the SDKs refuse a response whose status is missing or code 0."""
    return pb.Status(code=code, message=message)


PUT_STATUS_CODES: Final[dict[PutMessageStatus, pb.Code]] = {
    PutMessageStatus.PUT_OK: pb.Code.OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: pb.Code.MASTER_PERSISTENCE_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: pb.Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: pb.Code.HA_NOT_AVAILABLE,
    PutMessageStatus.SERVICE_NOT_AVAILABLE: pb.Code.INTERNAL_SERVER_ERROR,
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: pb.Code.INTERNAL_SERVER_ERROR,
    PutMessageStatus.MESSAGE_ILLEGAL: pb.Code.BAD_REQUEST,
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
    PutMessageStatus.OS_PAGECACHE_BUSY: pb.Code.TOO_MANY_REQUESTS,
    PutMessageStatus.UNKNOWN_ERROR: pb.Code.INTERNAL_SERVER_ERROR,
}
"""A stored-with-timeout status keeps its own code: the SDKs read it per entry."""
