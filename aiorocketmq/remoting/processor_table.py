"""ProcessorTable: the request handlers of a remoting endpoint, by request code.

Owns: the handler types (a processor answers inline or with an awaitable), the
code -> handler table with RocketMQ's default processor, and the replies to a
code nobody handles and to a processor that raised. ``connection`` dispatches
through it and re-exports its names.

Must not: do I/O or know any request code's meaning.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeAlias

from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.errors import ProcessorError

if TYPE_CHECKING:
    from aiorocketmq.remoting.connection import RemotingConnection

__all__ = ["Handler", "HandlerResult", "ProcessorTable", "error_reply", "not_supported"]

log = logging.getLogger(__name__)

HandlerResult: TypeAlias = RemotingCommand | bytes | Awaitable[RemotingCommand | None] | None
#: A processor: gets the connection and the request, returns the reply (or None for
#: no reply), either directly or as an awaitable. Plain functions answer inline, in
#: the same ``data_received`` call, which is what keeps cheap requests cheap. An
#: inline reply may also be the ``bytes`` of ``RemotingConnection.encode_reply``.
Handler: TypeAlias = Callable[["RemotingConnection", RemotingCommand], HandlerResult]


class ProcessorTable:
    """Request handlers keyed by request code, plus an optional default handler."""

    __slots__ = ("_default", "_handlers")

    def __init__(self) -> None:
        self._handlers: dict[int, Handler] = {}
        self._default: Handler | None = None

    def register(self, code: int, handler: Handler) -> None:
        """Route requests with ``code`` to ``handler``; registering a code twice is a bug."""
        if int(code) in self._handlers:
            raise ValueError(f"request code {int(code)} already has a processor")
        self._handlers[int(code)] = handler

    def set_default(self, handler: Handler) -> None:
        """Handle every code without its own processor (RocketMQ's default processor)."""
        self._default = handler

    def get(self, code: int) -> Handler | None:
        """The handler for ``code``, the default one, or None."""
        return self._handlers.get(code, self._default)

    def __contains__(self, code: object) -> bool:
        return code in self._handlers


def not_supported(request: RemotingCommand) -> RemotingCommand:
    """The reply RocketMQ gives to a code nobody handles (remark text included)."""
    return request.response_to(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
    )


def error_reply(request: RemotingCommand, exc: Exception, remote: str) -> RemotingCommand:
    """The reply to a processor that raised: its code and remark, or SYSTEM_ERROR."""
    if isinstance(exc, ProcessorError):
        return request.response_to(exc.code, exc.remark)
    # One line per failure, with what identifies the request; the connection stays up.
    log.error(
        "processor failed code=%s opaque=%s remote=%s error=%s: %s",
        request.code,
        request.opaque,
        remote,
        type(exc).__name__,
        exc,
        exc_info=log.isEnabledFor(logging.DEBUG),
    )
    return request.response_to(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
