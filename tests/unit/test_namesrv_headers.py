"""Name-server headers: Java's field names, required fields, parse rules, round trips."""

from __future__ import annotations

import pytest

from aiorocketmq.remoting.errors import HeaderFieldError
from aiorocketmq.remoting.namesrv_headers import (
    AddWritePermOfBrokerResponseHeader,
    BrokerNameHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    RegisterTopicRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)

pytestmark = pytest.mark.timeout(30)

HEADERS = [
    RegisterBrokerRequestHeader("broker-a", "h:1", "c", "h:2", 1, True, 123),
    RegisterBrokerResponseHeader("h:2", "h:1"),
    RegisterBrokerResponseHeader(),
    UnRegisterBrokerRequestHeader("broker-a", "h:1", "c", 0),
    QueryDataVersionRequestHeader("broker-a", "h:1", "c", 0),
    QueryDataVersionResponseHeader(True),
    GetRouteInfoRequestHeader("T", True),
    GetRouteInfoRequestHeader("T"),
    PutKVConfigRequestHeader("ns", "k", "v"),
    GetKVConfigRequestHeader("ns", "k"),
    GetKVConfigResponseHeader("v"),
    GetKVListByNamespaceRequestHeader("ns"),
    DeleteTopicFromNamesrvRequestHeader("T", "c"),
    DeleteTopicFromNamesrvRequestHeader("T"),
    BrokerNameHeader("broker-a"),
    WipeWritePermOfBrokerResponseHeader(3),
    AddWritePermOfBrokerResponseHeader(4),
    GetTopicsByClusterRequestHeader("c"),
    RegisterTopicRequestHeader("T"),
]


@pytest.mark.parametrize("header", HEADERS, ids=lambda h: type(h).__name__)
def test_round_trip_through_ext_fields(header: object) -> None:
    fields = header.to_ext_fields()  # type: ignore[attr-defined]
    assert all(isinstance(v, str) for v in fields.values())  # the C++ client reads strings
    assert type(header).from_ext_fields(fields) == header  # type: ignore[attr-defined]


def test_register_broker_uses_java_names_and_defaults() -> None:
    fields = {
        "brokerName": "broker-a",
        "brokerAddr": "h:1",
        "clusterName": "c",
        "haServerAddr": "h:2",
        "brokerId": "0",
    }
    header = RegisterBrokerRequestHeader.from_ext_fields(fields)
    assert (header.compressed, header.body_crc32) == (False, 0)
    assert RegisterBrokerRequestHeader("b", "a", "c", "h", 2, False, 7).to_ext_fields() == {
        "brokerName": "b",
        "brokerAddr": "a",
        "clusterName": "c",
        "haServerAddr": "h",
        "brokerId": "2",
        "compressed": "false",
        "bodyCrc32": "7",
    }
    for name in fields:
        partial = {k: v for k, v in fields.items() if k != name}
        with pytest.raises(HeaderFieldError, match=f"<{name}> is null"):
            RegisterBrokerRequestHeader.from_ext_fields(partial)
    with pytest.raises(HeaderFieldError, match="brokerId"):
        RegisterBrokerRequestHeader.from_ext_fields({**fields, "brokerId": "x"})


def test_absent_optional_fields_are_left_out() -> None:
    assert RegisterBrokerResponseHeader().to_ext_fields() == {}
    assert GetRouteInfoRequestHeader("T").to_ext_fields() == {"topic": "T"}
    assert GetRouteInfoRequestHeader.from_ext_fields(
        {"topic": "T", "acceptStandardJsonOnly": "false"}
    ) == GetRouteInfoRequestHeader("T", False)
