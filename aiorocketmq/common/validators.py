"""Topic and group name rules, with RocketMQ's own remark texts.

Owns: the broker-side topic check (``TopicValidator.validateTopic``), the client-side
topic and group checks (client ``Validators.checkTopic`` / ``checkGroup``), and the
system-topic and not-allowed-to-send checks. Checks return the remark RocketMQ would
put in its reply (or exception) and ``None`` when the name is valid, so the broker can
answer with the exact text and the client can raise its own error type.

Must not: do I/O, raise for an invalid name, or decide response codes (the broker
answers SYSTEM_ERROR for a bad topic and NO_PERMISSION for a forbidden one).

Rules (4.9.x): a name is non-blank, only ``[%|a-zA-Z0-9_-]``, topics at most 127
characters, groups at most 255. Java counts UTF-16 units; any non-ASCII character
is illegal anyway, so counting code points gives the same verdicts.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

from aiorocketmq.common.constants import (
    CHARACTER_MAX_LENGTH,
    NOT_ALLOWED_SEND_TOPICS,
    SYSTEM_TOPIC_PREFIX,
    SYSTEM_TOPICS,
    TOPIC_MAX_LENGTH,
)

VALID_NAME_PATTERN: Final = "^[%|a-zA-Z0-9_-]+$"
"""The pattern quoted in RocketMQ's remarks."""

# fullmatch with an explicit ASCII class: ``$`` alone would accept a trailing newline.
_VALID_NAME_RE: Final = re.compile(r"[%|a-zA-Z0-9_\-]+")


# Java's Character.isWhitespace: separators other than the no-break spaces, plus
# these controls. Python's isspace() agrees on ASCII but not beyond (e.g. U+0085, U+00A0).
_JAVA_WHITESPACE_CONTROLS: Final = frozenset("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f")
_JAVA_NO_BREAK_SPACES: Final = frozenset("\u00a0\u2007\u202f")


def _java_is_whitespace(ch: str) -> bool:
    if ch in _JAVA_WHITESPACE_CONTROLS:
        return True
    if ch in _JAVA_NO_BREAK_SPACES:
        return False
    return unicodedata.category(ch) in ("Zs", "Zl", "Zp")


def _is_blank(text: str) -> bool:
    # Java's UtilAll.isBlank: empty or only whitespace.
    if not text:
        return True
    if text.isascii():
        return text.isspace()
    return all(_java_is_whitespace(ch) for ch in text)


def is_topic_or_group_illegal(name: str) -> bool:
    """Whether ``name`` holds a character outside ``[%|a-zA-Z0-9_-]`` (empty is legal here).

    Mirrors ``TopicValidator.isTopicOrGroupIllegal``, which checks characters only.
    """
    return bool(name) and _VALID_NAME_RE.fullmatch(name) is None


def validate_topic(topic: str) -> str | None:
    """Check a topic name as the broker does (``TopicValidator.validateTopic``).

    Checks run in Java's order: blank, characters, length.

    Args:
        topic: the topic from a request.

    Returns:
        None when valid, else the broker's remark text.
    """
    if _is_blank(topic):
        return "The specified topic is blank."
    if is_topic_or_group_illegal(topic):
        return (
            f"The specified topic contains illegal characters, allowing only {VALID_NAME_PATTERN}"
        )
    if len(topic) > TOPIC_MAX_LENGTH:
        return "The specified topic is longer than topic max length."
    return None


def validate_topic_client(topic: str) -> str | None:
    """Check a topic name as a Java client does before sending (``Validators.checkTopic``).

    Checks run in the client's order: blank, length, characters.

    Args:
        topic: the topic of a message about to be sent.

    Returns:
        None when valid, else the client's exception message.
    """
    if _is_blank(topic):
        return "The specified topic is blank"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
    if is_topic_or_group_illegal(topic):
        return (
            f"The specified topic[{topic}] contains illegal characters, "
            f"allowing only {VALID_NAME_PATTERN}"
        )
    return None


def validate_group(group: str) -> str | None:
    """Check a producer or consumer group name (client ``Validators.checkGroup``).

    Checks run in Java's order: blank, length (255), characters.

    Args:
        group: the group name.

    Returns:
        None when valid, else RocketMQ's message text.
    """
    if _is_blank(group):
        return "the specified group is blank"
    if len(group) > CHARACTER_MAX_LENGTH:
        return f"the specified group is longer than group max length {CHARACTER_MAX_LENGTH}."
    if is_topic_or_group_illegal(group):
        return (
            f"the specified group[{group}] contains illegal characters, "
            f"allowing only {VALID_NAME_PATTERN}"
        )
    return None


def is_system_topic(topic: str) -> bool:
    """Whether ``topic`` is reserved for the system (``TopicValidator.isSystemTopic``)."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def system_topic_remark(topic: str) -> str | None:
    """Return the remark for creating a system topic by hand, or None if not system."""
    if is_system_topic(topic):
        return f"The topic[{topic}] is conflict with system topic."
    return None


def is_not_allowed_send_topic(topic: str) -> bool:
    """Whether clients may not send to ``topic`` (``isNotAllowedSendTopic``)."""
    return topic in NOT_ALLOWED_SEND_TOPICS


def not_allowed_send_remark(topic: str) -> str | None:
    """Return the NO_PERMISSION remark for a send to ``topic``, or None when allowed."""
    if is_not_allowed_send_topic(topic):
        return f"Sending message to topic[{topic}] is forbidden."
    return None
