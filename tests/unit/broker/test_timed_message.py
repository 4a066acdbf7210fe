"""RocketMQ 5's timer properties: which wins, what "now" means, what is refused."""

from __future__ import annotations

import pytest

from aiorocketmq.broker.timed_message import TIMER_TOPIC, deliver_time_ms

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("props", "due"),
    [
        ({}, None),
        ({"TAGS": "a"}, None),
        ({"TIMER_DELIVER_MS": str(NOW + 5)}, NOW + 5),
        ({"TIMER_DELIVER_MS": "+7"}, 7),  # Long.parseLong takes a sign
        ({"TIMER_DELAY_MS": "250"}, NOW + 250),
        ({"TIMER_DELAY_SEC": "3"}, NOW + 3000),
        ({"TIMER_DELAY_SEC": "-3"}, NOW - 3000),  # past: stored at once by the caller
        # TIMER_DELAY_SEC wins over TIMER_DELAY_MS over TIMER_DELIVER_MS.
        ({"TIMER_DELAY_SEC": "1", "TIMER_DELAY_MS": "9", "TIMER_DELIVER_MS": "9"}, NOW + 1000),
        ({"TIMER_DELAY_MS": "2", "TIMER_DELIVER_MS": "9"}, NOW + 2),
        # The timer's own records are not timed again.
        ({"TIMER_DELAY_SEC": "1", "TIMER_OUT_MS": "5"}, None),
    ],
)
def test_delivery_time(props: dict[str, str], due: int | None) -> None:
    assert deliver_time_ms(props, "T", NOW) == due


def test_the_timer_topic_is_not_timed() -> None:
    assert deliver_time_ms({"TIMER_DELIVER_MS": str(NOW + 9)}, TIMER_TOPIC, NOW) is None


@pytest.mark.parametrize("raw", ["", " 1", "1 ", "1.5", "0x10", "1_000", "\u0661", "--1", "soon"])
def test_values_that_are_not_java_longs_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="is not an integer"):
        deliver_time_ms({"TIMER_DELAY_MS": raw}, "T", NOW)


def test_a_huge_value_is_a_value_error_not_a_crash() -> None:
    with pytest.raises(ValueError):  # Python's int() digit limit, or ours
        deliver_time_ms({"TIMER_DELIVER_MS": "9" * 5000}, "T", NOW)
