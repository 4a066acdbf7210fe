"""RocketMQ 5's timer properties on a sent message, and the delivery time they ask
for (``HookUtils.checkIfTimerMessage`` / ``transformTimerMessage``).

``TIMER_DELAY_SEC`` wins over ``TIMER_DELAY_MS`` over ``TIMER_DELIVER_MS``; a message
of the timer's own topic, or one carrying ``TIMER_OUT_MS``, is not a timed message.
Unlike RocketMQ, the time is not rounded down to a timer tick (``timerPrecisionMs``,
1 s): a timed message is never delivered early.

Owns: the property names and ``deliver_time_ms``. Must not: hold state or I/O (the
send path and ``broker.timer`` use it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

__all__ = [
    "PROPERTY_TIMER_DELAY_MS",
    "PROPERTY_TIMER_DELAY_SEC",
    "PROPERTY_TIMER_DELIVER_MS",
    "TIMER_PROPERTIES",
    "TIMER_TOPIC",
    "deliver_time_ms",
]

#: The system topic timed messages wait in (RocketMQ 5's ``TimerMessageStore.TIMER_TOPIC``).
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
PROPERTY_TIMER_DELIVER_MS: Final = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC: Final = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS: Final = "TIMER_DELAY_MS"
#: RocketMQ 5's timer properties (``Message.setDeliverTimeMs / setDelayTimeSec /
#: setDelayTimeMs``).
TIMER_PROPERTIES: Final = (
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS,
)
_TIMER_OUT_MS: Final = "TIMER_OUT_MS"
_JAVA_LONG = re.compile(r"[+-]?[0-9]+")


def deliver_time_ms(props: Mapping[str, str], topic: str, now_ms: int) -> int | None:
    """When a message sent with RocketMQ 5's timer properties is due, or None when it
    has none (or is the timer's own: ``rmq_sys_wheel_timer``, ``TIMER_OUT_MS``).

    ``TIMER_DELAY_SEC`` wins over ``TIMER_DELAY_MS`` over ``TIMER_DELIVER_MS``, as
    ``HookUtils.transformTimerMessage``; a time not after ``now_ms`` means "now".

    Raises:
        ValueError: the property is not an integer (Java's ``Long.parseLong`` form).
    """
    if topic == TIMER_TOPIC or _TIMER_OUT_MS in props:
        return None
    for key, scale, base in (
        (PROPERTY_TIMER_DELAY_SEC, 1000, now_ms),
        (PROPERTY_TIMER_DELAY_MS, 1, now_ms),
        (PROPERTY_TIMER_DELIVER_MS, 1, 0),
    ):
        raw = props.get(key)
        if raw is not None:
            if not _JAVA_LONG.fullmatch(raw):
                raise ValueError(f"{key}={raw!r} is not an integer")
            return base + int(raw) * scale
    return None
