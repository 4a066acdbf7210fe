"""HAService's facade rules: the side follows brokerRole, install once, start after it."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiorocketmq.broker.ha.service import HAService
from aiorocketmq.broker.ha.slave import parse_address
from aiorocketmq.runtime.lifecycle import ServiceStateError
from aiorocketmq.store.config import BrokerRole
from tests.unit.ha.ha_support import master_config, slave_config
from tests.unit.store.store_support import inner, open_store


@pytest.mark.parametrize("role", list(BrokerRole))
async def test_role_picks_the_side_and_the_waiter(tmp_path: Path, role: BrokerRole) -> None:
    config = slave_config(tmp_path) if role is BrokerRole.SLAVE else master_config(tmp_path, role)
    store = await open_store(config)
    ha = HAService(config, host="127.0.0.1")
    try:
        ha.install(store)
        assert (ha.server is not None) is (role is not BrokerRole.SLAVE)
        assert (ha.client is not None) is (role is BrokerRole.SLAVE)
        waiter = store.replica_waiter
        assert (waiter is not None) is (role is BrokerRole.SYNC_MASTER)
        with pytest.raises(ServiceStateError):
            ha.install(store)
        await ha.start()
        if role is BrokerRole.SLAVE:
            assert ha.ha_port is None and ha.runtime_info()["haConnected"] == "false"
        else:
            assert ha.ha_port is not None and ha.ha_port > 0  # port 0 -> a bound port
            ha.update_master_address("127.0.0.1:1")  # ignored on a master
            assert ha.runtime_info()["haSlaveNum"] == "0"
            if role is BrokerRole.SYNC_MASTER:
                result = await store.put_message(inner(b"x"))
                assert result.status.name == "SLAVE_NOT_AVAILABLE"
    finally:
        await ha.shutdown()
        await store.shutdown()


async def test_start_before_install_is_refused(tmp_path: Path) -> None:
    ha = HAService(master_config(tmp_path))
    with pytest.raises(ServiceStateError):
        await ha.start()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:10912", ("127.0.0.1", 10912)), (" host.example:1 ", ("host.example", 1))],
)
def test_parse_address(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["", "10912", ":10912", "host:", "host:0", "host:65536", "h:x"])
def test_parse_address_refuses_garbage(text: str) -> None:
    with pytest.raises(ValueError, match="HA address"):
        parse_address(text)
