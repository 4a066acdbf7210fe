"""Fixtures of the admin tests: an in-process name server and a real in-process broker."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.server import NamesrvController
from tests.support.cluster import in_process_broker, wait_route


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvController]:
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        kv_config_path=str(tmp_path / "namesrv-kv.json"),
        broker_scan_interval_millis=3_600_000,
        broker_scan_initial_delay_millis=3_600_000,
    )
    controller = NamesrvController(config)
    await controller.start()
    yield controller
    await controller.shutdown()


@pytest.fixture
async def broker(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[BrokerController]:
    """broker-a of DefaultCluster, registered with ``namesrv``."""
    async with in_process_broker(tmp_path / "brokers", "broker-a", namesrv.address) as started:
        await wait_route(
            namesrv.address,
            "TBW102",
            lambda route: any(bd.broker_name == "broker-a" for bd in route.broker_datas),
        )
        yield started


@pytest.fixture
async def admin(namesrv: NamesrvController) -> AsyncIterator[MQAdmin]:
    async with MQAdmin(namesrv.address) as client:
        yield client
