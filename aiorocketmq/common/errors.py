"""The root of aiorocketmq's exception tree and the protocol-error pair.

Owns: ``RocketMQError`` (every exception the project raises derives from it) and
the h11-style split of protocol errors into *local* (we were asked to produce bytes
that the format cannot carry) and *remote* (the peer sent bytes that do not parse).

Must not: import anything of ours, touch I/O, or hold state.

Tree::

    RocketMQError
    └── ProtocolError                 a wire or disk format was violated
        ├── LocalProtocolError        our side tried to encode something invalid
        └── RemoteProtocolError       bytes we received (or read) are malformed
"""

from __future__ import annotations


class RocketMQError(Exception):
    """Base class of every exception raised by aiorocketmq."""


class ProtocolError(RocketMQError):
    """A wire or on-disk format was violated.

    Codecs raise only subclasses of this for bad input, never ``struct.error``,
    ``IndexError``, ``UnicodeDecodeError`` or friends: callers can rely on
    "commands or a ProtocolError, nothing else".
    """


class LocalProtocolError(ProtocolError):
    """We were asked to encode a value the format cannot represent."""


class RemoteProtocolError(ProtocolError):
    """Bytes that came from a peer or a file do not follow the format."""
