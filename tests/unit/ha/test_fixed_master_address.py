"""A slave with ``haMasterAddress`` keeps it: the name server's HA address is ignored.

Java's ``BrokerController`` sets ``updateMasterHAServerAddrPeriodically`` only when
``haMasterAddress`` is unset, so a configured address (a proxy, a NAT address)
survives every registration reply.
"""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.broker.ha.service import HAService
from tests.unit.ha.ha_support import slave_config
from tests.unit.store.store_support import open_store


async def test_configured_address_survives_registration_replies(tmp_path: Path) -> None:
    config = slave_config(tmp_path, ha_master_address="127.0.0.1:1")
    store = await open_store(config)
    ha = HAService(config, host="127.0.0.1")
    try:
        ha.install(store)
        assert ha.client is not None and ha.fixed_master_address
        ha.update_master_address("127.0.0.1:10912")  # what the name server says
        assert ha.client.master_address == "127.0.0.1:1"
    finally:
        await store.shutdown()


async def test_unconfigured_address_follows_registration_replies(tmp_path: Path) -> None:
    config = slave_config(tmp_path)
    store = await open_store(config)
    ha = HAService(config, host="127.0.0.1")
    try:
        ha.install(store)
        assert ha.client is not None and not ha.fixed_master_address
        ha.update_master_address("127.0.0.1:10912")
        assert ha.client.master_address == "127.0.0.1:10912"
    finally:
        await store.shutdown()
