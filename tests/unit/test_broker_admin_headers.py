"""Admin request headers added for the broker's admin processors: round trips and Java's rules."""

from __future__ import annotations

import pytest

from aiorocketmq.remoting.broker_admin_headers import (
    DeleteSubscriptionGroupRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from aiorocketmq.remoting.errors import HeaderFieldError

HEADERS = [
    DeleteSubscriptionGroupRequestHeader("CID_a", True),
    DeleteSubscriptionGroupRequestHeader("CID_a"),
    GetTopicStatsInfoRequestHeader("TopicTest"),
    GetConsumeStatsRequestHeader("CID_a", "TopicTest"),
    GetConsumeStatsRequestHeader("CID_a"),
    GetConsumerConnectionListRequestHeader("CID_a"),
    GetProducerConnectionListRequestHeader("PID_a"),
]


@pytest.mark.parametrize("header", HEADERS, ids=lambda h: type(h).__name__)
def test_round_trip(header: object) -> None:
    fields = header.to_ext_fields()  # type: ignore[attr-defined]
    assert all(isinstance(v, str) for v in fields.values())
    assert type(header).from_ext_fields(fields) == header  # type: ignore[attr-defined]


def test_java_field_names() -> None:
    assert DeleteSubscriptionGroupRequestHeader("g", True).to_ext_fields() == {
        "groupName": "g",
        "removeOffset": "true",
    }
    assert GetConsumeStatsRequestHeader("g").to_ext_fields() == {"consumerGroup": "g"}
    assert GetProducerConnectionListRequestHeader("p").to_ext_fields() == {"producerGroup": "p"}


@pytest.mark.parametrize(
    ("cls", "missing"),
    [
        (DeleteSubscriptionGroupRequestHeader, "groupName"),
        (GetTopicStatsInfoRequestHeader, "topic"),
        (GetConsumeStatsRequestHeader, "consumerGroup"),
        (GetConsumerConnectionListRequestHeader, "consumerGroup"),
        (GetProducerConnectionListRequestHeader, "producerGroup"),
    ],
)
def test_missing_required_field(cls: type, missing: str) -> None:
    with pytest.raises(HeaderFieldError, match=f"<{missing}> is null"):
        cls.from_ext_fields({})
