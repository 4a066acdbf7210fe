"""The client's typed exception tree.

Owns: every exception the client package raises to its callers, each with a
``retriable`` flag (may the same operation succeed if tried again, possibly on
another broker?), and ``from_remoting``, which turns a transport error of the
remoting layer into the client's own type (raised ``from`` the original).

Must not: do I/O or decide retries (the producer and consumers do, using
``retriable`` and ``PRODUCER_RETRY_RESPONSE_CODES``).

Tree::

    RocketMQError
    └── MQClientError                      base of everything the client raises
        ├── MQResponseError(code, remark)  a server answered with an error code
        │   ├── MQBrokerError              ... a broker (Java's MQBrokerException)
        │   └── MQNamesrvError             ... a name server
        ├── MQRemotingError                transport failure (always retriable)
        │   ├── MQConnectError             could not connect
        │   ├── MQTimeoutError             no reply in time (also a TimeoutError)
        │   ├── MQSendRequestError         connection closed mid-flight
        │   └── MQTooMuchRequestError      in-flight bound reached
        ├── NoNameServerError              no name server configured / none answered
        ├── NoRouteError                   the topic has no route (TOPIC_NOT_EXIST)
        ├── BrokerNotFoundError            no address known for a brokerName
        ├── SendFailedError                every attempt of a send failed
        ├── InvalidArgumentError           bad message, topic, group or option
        └── ClientStateError               not started, or already shut down
"""

from __future__ import annotations

from typing import Final

from aiorocketmq.common.errors import RocketMQError
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)

__all__ = [
    "PRODUCER_RETRY_RESPONSE_CODES",
    "BrokerNotFoundError",
    "ClientStateError",
    "InvalidArgumentError",
    "MQBrokerError",
    "MQClientError",
    "MQConnectError",
    "MQNamesrvError",
    "MQRemotingError",
    "MQResponseError",
    "MQSendRequestError",
    "MQTimeoutError",
    "MQTooMuchRequestError",
    "NoNameServerError",
    "NoRouteError",
    "SendFailedError",
    "from_remoting",
]

PRODUCER_RETRY_RESPONSE_CODES: Final[frozenset[int]] = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
    }
)
"""Broker reply codes after which a sync send tries again (Java DefaultMQProducer 4.9.8)."""


class MQClientError(RocketMQError):
    """Base of every exception the client raises.

    Attributes:
        retriable: whether trying the same operation again may succeed.
    """

    retriable: bool = False


class MQResponseError(MQClientError):
    """A server answered with a non-success code.

    Args:
        code: the RocketMQ response code.
        remark: the server's remark (may be None).
        address: the server's ``host:port``, when known.
        retriable: overrides the default (``code in PRODUCER_RETRY_RESPONSE_CODES``).
    """

    def __init__(
        self,
        code: int,
        remark: str | None,
        *,
        address: str | None = None,
        retriable: bool | None = None,
    ) -> None:
        where = "" if address is None else f" [{address}]"
        super().__init__(f"CODE: {int(code)} DESC: {remark}{where}")
        self.code = int(code)
        self.remark = remark
        self.address = address
        self.retriable = code in PRODUCER_RETRY_RESPONSE_CODES if retriable is None else retriable


class MQBrokerError(MQResponseError):
    """A broker answered with an error code (Java's MQBrokerException)."""


class MQNamesrvError(MQResponseError):
    """A name server answered with an error code."""


class MQRemotingError(MQClientError):
    """The request did not complete at the transport level; another try may succeed."""

    retriable = True

    def __init__(self, message: str, *, address: str | None = None) -> None:
        super().__init__(message)
        self.address = address


class MQConnectError(MQRemotingError):
    """Connecting to the server failed or timed out."""


class MQTimeoutError(MQRemotingError, TimeoutError):
    """The server did not answer in time.

    Also a ``TimeoutError``, so ``except TimeoutError`` catches it as it catches
    ``asyncio.timeout``'s; ``str()`` is the message, ``errno`` is None.
    """


class MQSendRequestError(MQRemotingError):
    """The connection closed before the reply arrived."""


class MQTooMuchRequestError(MQRemotingError):
    """Too many requests in flight, or the operation's whole time budget ran out."""


class NoNameServerError(MQClientError):
    """No name server address is configured, or none of them answered."""

    retriable = True


class NoRouteError(MQClientError):
    """The name servers have no route for the topic."""

    def __init__(self, topic: str, detail: str | None = None) -> None:
        text = f"No route info of this topic: {topic}"
        super().__init__(text if detail is None else f"{text} ({detail})")
        self.topic = topic


class BrokerNotFoundError(MQClientError):
    """No address is known for the broker (Java: "The broker[...] not exist")."""

    retriable = True

    def __init__(self, broker_name: str) -> None:
        super().__init__(f"The broker[{broker_name}] not exist")
        self.broker_name = broker_name


class SendFailedError(MQClientError):
    """Every attempt of a send failed (Java: "Send [n] times, still failed ...").

    Args:
        message: what happened, with the brokers tried.
        brokers_sent: the broker of each attempt, in order.
        last: the last attempt's error (also the ``__cause__``).
    """

    def __init__(self, message: str, brokers_sent: list[str], last: MQClientError | None) -> None:
        super().__init__(message)
        self.brokers_sent = brokers_sent
        self.last = last
        self.retriable = last.retriable if last is not None else False
        self.code: int | None = last.code if isinstance(last, MQResponseError) else None


class InvalidArgumentError(MQClientError, ValueError):
    """A message, name or option is invalid (Java's MQClientException from Validators)."""


class ClientStateError(MQClientError):
    """The object is not started yet, or was shut down."""


_REMOTING_MAP: Final[tuple[tuple[type[RemotingError], type[MQRemotingError]], ...]] = (
    (RemotingConnectError, MQConnectError),
    (RemotingTimeoutError, MQTimeoutError),
    (RemotingSendRequestError, MQSendRequestError),
    (RemotingTooMuchRequestError, MQTooMuchRequestError),
)


def from_remoting(exc: RemotingError) -> MQRemotingError:
    """The client-side error for a remoting-layer error (raise it ``from exc``).

    Args:
        exc: what ``RemotingClient.invoke`` raised.

    Returns:
        An ``MQRemotingError`` subclass instance with the same message and address.
    """
    for remote_type, client_type in _REMOTING_MAP:
        if isinstance(exc, remote_type):
            return client_type(str(exc), address=exc.address)
    return MQRemotingError(str(exc), address=exc.address)
