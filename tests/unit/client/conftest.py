"""Fixtures of the client tests: an in-process name server, and real in-process brokers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.client.namesrv_api import NamesrvAPI
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.server import NamesrvController
from tests.support.cluster import in_process_broker
from tests.support.wait import wait_until


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


StartBroker = Callable[..., Awaitable[BrokerController]]


@pytest.fixture
async def start_broker(tmp_path: Path, namesrv: NamesrvController) -> AsyncIterator[StartBroker]:
    """Start a real BrokerController registered with ``namesrv``; stopped at teardown."""
    async with AsyncExitStack() as stack:

        async def start(name: str = "broker-a", **settings: Any) -> BrokerController:
            broker = await stack.enter_async_context(
                in_process_broker(tmp_path / "brokers", name, namesrv.address, **settings)
            )
            async with NamesrvAPI(namesrv.address) as api:

                async def registered() -> bool:
                    return name in (await api.get_cluster_info()).broker_addr_table

                await wait_until(registered, timeout=15, what=f"{name} registered")
            return broker

        yield start
