"""Exceptions of the store's file layer.

Owns: ``StoreError`` and its few subclasses. Outcomes a caller is expected to handle
on the hot path (a record that does not fit, a next file that is not ready yet, a
duplicate ConsumeQueue unit) are *statuses* in the result types, never exceptions;
these classes are for broken invariants of files on disk and for I/O that failed.

Must not: import anything of ours but ``common.errors``, or hold state.

Tree::

    RocketMQError
    └── StoreError                 the store cannot do what was asked
        ├── StoreLoadError         a directory or file does not look like a 4.9 store
        │   └── StoreLockedError   another store holds the directory's lock file
        └── StoreIOError           an I/O call on a store file failed (or a test said so)
"""

from __future__ import annotations

from aiorocketmq.common.errors import RocketMQError


class StoreError(RocketMQError):
    """The store cannot do what was asked."""


class StoreLoadError(StoreError):
    """A store directory or file does not have the shape RocketMQ 4.9 gives it.

    Raised at load time for a file of the wrong size, a file name that is not a
    20-digit offset (or a 17-digit IndexFile time), or a queue directory that is not
    a directory. A stock 4.9 broker refuses to start in the same cases, so we do too
    instead of guessing.
    """


class StoreLockedError(StoreLoadError):
    """Another store (this process or another, Java brokers included) holds ``<root>/lock``.

    RocketMQ refuses to start with "Lock failed, MQ already started"; so do we.
    """


class StoreIOError(StoreError):
    """An I/O call on a store file failed, or a test injected a write failure.

    The original ``OSError`` is the ``__cause__`` when there is one.
    """
