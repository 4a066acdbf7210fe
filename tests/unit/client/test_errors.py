"""The client's exception tree: retriable flags and the remoting mapping."""

from __future__ import annotations

import pytest

from aiorocketmq.client.errors import (
    PRODUCER_RETRY_RESPONSE_CODES,
    InvalidArgumentError,
    MQBrokerError,
    MQClientError,
    MQConnectError,
    MQRemotingError,
    MQSendRequestError,
    MQTimeoutError,
    MQTooMuchRequestError,
    NoRouteError,
    from_remoting,
)
from aiorocketmq.common.errors import RocketMQError
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)


def test_retry_codes_are_javas_six() -> None:
    assert {ResponseCode(c).name for c in PRODUCER_RETRY_RESPONSE_CODES} == {
        "TOPIC_NOT_EXIST",
        "SERVICE_NOT_AVAILABLE",
        "SYSTEM_ERROR",
        "NO_PERMISSION",
        "NO_BUYER_ID",
        "NOT_IN_CURRENT_UNIT",
    }


@pytest.mark.parametrize("code", list(ResponseCode))
def test_broker_error_retriable_follows_the_code(code: ResponseCode) -> None:
    err = MQBrokerError(code, "why", address="1.2.3.4:10911")
    assert err.code == int(code) and err.remark == "why"
    assert err.retriable is (code in PRODUCER_RETRY_RESPONSE_CODES)
    assert str(err) == f"CODE: {int(code)} DESC: why [1.2.3.4:10911]"
    assert isinstance(err, MQClientError) and isinstance(err, RocketMQError)


def test_broker_error_retriable_can_be_overridden() -> None:
    assert MQBrokerError(ResponseCode.SYSTEM_ERROR, None, retriable=False).retriable is False
    assert MQBrokerError(ResponseCode.FLOW_CONTROL, None, retriable=True).retriable is True


@pytest.mark.parametrize(
    ("remote", "local"),
    [
        (RemotingConnectError, MQConnectError),
        (RemotingTimeoutError, MQTimeoutError),
        (RemotingSendRequestError, MQSendRequestError),
        (RemotingTooMuchRequestError, MQTooMuchRequestError),
        (RemotingError, MQRemotingError),
    ],
)
def test_from_remoting_maps_each_transport_error(
    remote: type[RemotingError], local: type[MQRemotingError]
) -> None:
    mapped = from_remoting(remote("boom", address="h:1"))
    assert type(mapped) is local
    assert mapped.retriable is True
    assert mapped.address == "h:1"
    assert "boom" in str(mapped)


def test_misc_errors() -> None:
    assert str(NoRouteError("T")) == "No route info of this topic: T"
    assert NoRouteError("T").retriable is False
    assert isinstance(InvalidArgumentError("x"), ValueError)
