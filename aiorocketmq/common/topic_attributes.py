"""RocketMQ 5's topic attributes: the ``+key=value,-key`` modification text that
``mqadmin updateTopic -a`` and UPDATE_AND_CREATE_TOPIC's ``attributes`` field carry,
and the one attribute a broker knows, ``message.type``.

Rules (``AttributeParser.parseToMap``, ``AttributeUtil.alterCurrentAttributes``,
``TopicAttributes``): entries are comma separated; ``+key=value`` adds or changes a
key (a value is required), ``-key`` deletes one; a key may appear once. Creating a
topic allows only ``+``; updating one may delete only keys it has. The only key is
``message.type``, whose value is one of ``TopicMessageType``'s names. An update
without attributes keeps the topic's.

A topic without ``message.type`` is NORMAL for RocketMQ 5; this broker reads it as
MIXED (every type accepted), so 4.x topics keep taking whatever their clients send.

Owns: parsing, altering and validating attributes; the errors are ``ValueError`` with
RocketMQ's texts. Must not: do I/O or keep state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "MESSAGE_TYPE_ATTRIBUTE",
    "MIXED",
    "TOPIC_MESSAGE_TYPES",
    "alter_attributes",
    "parse_attributes",
    "topic_message_type",
]

MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"
MIXED: Final = "MIXED"
#: ``TopicMessageType``'s names (LITE and PRIORITY, which no SDK of ours sends, left out).
TOPIC_MESSAGE_TYPES: Final = frozenset(
    {"UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", MIXED}
)
_ALLOWED: Final = {MESSAGE_TYPE_ATTRIBUTE: TOPIC_MESSAGE_TYPES}


def parse_attributes(text: str | None) -> list[tuple[str, str, str]]:
    """``"+k=v,-k2"`` -> ``[("+", "k", "v"), ("-", "k2", "")]``; empty -> ``[]``.

    Raises:
        ValueError: a malformed entry, a ``+`` without a value, a key twice.
    """
    if not text:
        return []
    out: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for entry in text.split(","):
        key, _, value = entry.partition("=")
        sign, key = key[:1], key[1:]
        if sign == "+":
            if not value:
                raise ValueError(f"Add/alter attribute requires a value: {key}")
        elif sign == "-":
            value = ""
        else:
            raise ValueError(f"Invalid attribute format: {entry}")
        if not key or "+" in key or "-" in key:
            raise ValueError("kv string format wrong.")
        if key in seen:
            raise ValueError(f"Duplicate key: {key}")
        seen.add(key)
        out.append((sign, key, value))
    return out


def alter_attributes(
    create: bool, current: Mapping[str, str], modification: str | None
) -> dict[str, str]:
    """The attributes a topic has after ``modification`` (see the module docstring).

    Raises:
        ValueError: a malformed text, a ``-`` on create or of a missing key, an
            unsupported key, a value outside the key's set.
    """
    final = dict(current)
    for sign, key, value in parse_attributes(modification):
        allowed = _ALLOWED.get(key)
        if sign == "-":
            if create:
                raise ValueError(
                    f"only add attribute is supported while creating topic. key: {key}"
                )
            if key not in current:
                raise ValueError(f"attempt to delete a nonexistent key: {key}")
            if allowed is None:
                raise ValueError(f"unsupported key: {key}")
            final.pop(key, None)
            continue
        if allowed is None:
            raise ValueError(f"unsupported key: {key}")
        if value not in allowed:
            raise ValueError(f"value is not in set: {sorted(allowed)}")
        final[key] = value
    return final


def topic_message_type(attributes: Mapping[str, str]) -> str:
    """The topic's ``message.type``; MIXED when it has none (see the module docstring)."""
    return attributes.get(MESSAGE_TYPE_ATTRIBUTE) or MIXED
