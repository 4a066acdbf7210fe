"""Exceptions of the remoting layer.

Owns: the errors a remoting client or server raises, each saying whether a retry
may help (``retriable``), and ``ProcessorError``, which a request processor raises
to answer with a RocketMQ response code and remark.

Must not: know about brokers, name servers or clients.

Tree::

    RocketMQError
    ├── RemotingError
    │   ├── RemotingConnectError          could not connect            (retriable)
    │   ├── RemotingTimeoutError          no reply in time             (retriable)
    │   ├── RemotingSendRequestError      connection closed mid-flight (retriable)
    │   └── RemotingTooMuchRequestError   in-flight bound reached      (retriable)
    └── ProcessorError(code, remark)      a processor's error reply
        └── HeaderFieldError              a required extField is missing or malformed
"""

from __future__ import annotations

from aiorocketmq.common.errors import RocketMQError
from aiorocketmq.remoting.codes import ResponseCode


class RemotingError(RocketMQError):
    """A request could not complete at the transport level."""

    retriable: bool = True

    def __init__(self, message: str, *, address: str | None = None) -> None:
        super().__init__(message if address is None else f"{message} [{address}]")
        self.address = address


class RemotingConnectError(RemotingError):
    """Connecting to the peer failed or timed out."""


class RemotingTimeoutError(RemotingError):
    """The peer did not answer within the request's timeout."""


class RemotingSendRequestError(RemotingError):
    """The connection closed before the reply arrived (or before the request was sent)."""


class RemotingTooMuchRequestError(RemotingError):
    """Too many requests are already in flight; the bound protects both sides' memory."""


class ProcessorError(RocketMQError):
    """Raised by a request processor: the dispatcher replies with ``code`` and ``remark``.

    Args:
        code: the RocketMQ response code to send (``ResponseCode`` or a plain int).
        remark: the text stock clients show as the error message.
    """

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(f"{code}: {remark}")
        self.code = int(code)
        self.remark = remark


class HeaderFieldError(ProcessorError):
    """A required header field is missing or not parseable (Java's RemotingCommandException)."""

    def __init__(self, remark: str) -> None:
        super().__init__(ResponseCode.SYSTEM_ERROR, remark)
