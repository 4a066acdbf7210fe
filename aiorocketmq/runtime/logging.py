"""Log setup for processes, and structured key=value context for every module.

Owns: ``setup_logging`` (one handler on the root logger, one line per record,
text or JSON lines), the formatters, ``kv()`` for per-call context and
``get_logger()`` for a logger with bound context.

Modules log through ``logging.getLogger(__name__)`` (or ``get_logger``) and pass
context as ``extra``; the formatter renders every non-standard record attribute
as ``key=value`` after the message::

    log.info("queue created", extra=kv(component="broker", topic="T", queue_id=1))
    # 2024-05-01T10:00:00.123Z INFO aiorocketmq.broker.topic: queue created component=broker
    #   topic=T queue_id=1                            (one line; wrapped here)

Must not: be configured at import time (only ``setup_logging`` touches the root
logger, and only the CLIs call it), read the environment, or print anything
itself. Codecs never log; they raise.
"""

from __future__ import annotations

import json as jsonlib
import logging
import sys
import time
from collections.abc import Mapping, MutableMapping
from typing import IO, Any

__all__ = [
    "JsonFormatter",
    "KeyValueFormatter",
    "StructuredAdapter",
    "get_logger",
    "kv",
    "setup_logging",
]

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}

# Marks the handler setup_logging installs, so a second call replaces it.
_HANDLER_MARK = "_aiorocketmq_handler"

# Characters that force a value into quotes in the key=value form.
_NEEDS_QUOTES = frozenset(' ="\\\n\r\t')


def kv(**fields: object) -> dict[str, object]:
    """Context fields for ``extra=``: ``log.info("msg", extra=kv(topic=t))``.

    Args:
        **fields: Context, e.g. component, broker_name, topic, queue_id,
            opaque, code, physical_offset. Use units in names (``_ms``).

    Returns:
        A dict to pass as ``extra``.

    Raises:
        KeyError: If a name clashes with a LogRecord attribute (``name``,
            ``msg``, ``args``...), which logging would reject later anyway.
    """
    clash = _STANDARD_ATTRS.intersection(fields)
    if clash:
        raise KeyError(f"context keys clash with LogRecord attributes: {sorted(clash)}")
    return dict(fields)


class StructuredAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger with bound context, merged under each call's ``extra``.

    ``get_logger(__name__, component="broker").info("x", extra=kv(topic="T"))``
    logs ``component=broker topic=T``; a call's own field wins on a clash.
    """

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        bound: Mapping[str, object] = self.extra or {}
        kwargs["extra"] = {**bound, **(kwargs.get("extra") or {})}
        return msg, kwargs

    def bind(self, **fields: object) -> StructuredAdapter:
        """Return a new adapter with ``fields`` added to the bound context."""
        return StructuredAdapter(self.logger, {**(self.extra or {}), **kv(**fields)})


def get_logger(name: str, **fields: object) -> StructuredAdapter:
    """Return ``logging.getLogger(name)`` with ``fields`` bound as context.

    Args:
        name: Usually ``__name__``.
        **fields: Context rendered on every record, e.g. ``component="broker"``.
    """
    return StructuredAdapter(logging.getLogger(name), kv(**fields))


def _context(record: logging.LogRecord) -> dict[str, object]:
    """The record's ``extra`` fields, in the order they were given."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD_ATTRS}


def _iso_utc(created: float) -> str:
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
    return f"{seconds}.{int(created * 1000) % 1000:03d}Z"


def _render_value(value: object) -> str:
    text = value if isinstance(value, str) else str(value)
    if text == "" or not _NEEDS_QUOTES.isdisjoint(text):
        return jsonlib.dumps(text)  # quoted, with \n and " escaped: one line
    return text


class KeyValueFormatter(logging.Formatter):
    """``<ts> <LEVEL> <logger>: <message> k=v ...``, always exactly one line.

    Values with spaces, quotes or newlines are JSON-quoted. An exception's
    traceback goes into an ``exc`` field with its newlines escaped.
    """

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        parts = [_iso_utc(record.created), record.levelname, f"{record.name}:", message]
        line = " ".join(parts).replace("\n", "\\n")
        fields = _context(record)
        if record.exc_info:
            fields["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            fields["exc"] = record.exc_text
        if record.stack_info:
            fields["stack"] = record.stack_info
        rendered = " ".join(f"{k}={_render_value(v)}" for k, v in fields.items())
        return f"{line} {rendered}" if rendered else line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, context fields, exc."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": _iso_utc(record.created),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _context(record).items():
            doc.setdefault(key, value)
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = record.stack_info
        return jsonlib.dumps(doc, default=str, ensure_ascii=False)


def setup_logging(
    level: int | str = "INFO", *, json: bool = False, stream: IO[str] | None = None
) -> logging.Handler:
    """Configure the root logger for a process; idempotent.

    Installs one stream handler (replacing the one a previous call installed,
    leaving other handlers alone) and sets the root level. Quiet by default:
    INFO shows lifecycle and recovery lines, not per-request chatter.

    Args:
        level: A logging level name or number.
        json: Emit JSON lines instead of ``key=value`` text.
        stream: Where to write; defaults to ``sys.stderr`` at call time.

    Returns:
        The installed handler.

    Raises:
        ValueError: If ``level`` is not a known level name.
    """
    if isinstance(level, str):
        resolved = logging.getLevelName(level.upper())
        if not isinstance(resolved, int):
            raise ValueError(f"unknown log level {level!r}")
        level = resolved
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
        old.close()
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if json else KeyValueFormatter())
    setattr(handler, _HANDLER_MARK, True)
    root.addHandler(handler)
    root.setLevel(level)
    return handler
