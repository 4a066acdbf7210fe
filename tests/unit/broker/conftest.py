"""Fixtures of the broker unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from aiorocketmq.runtime import BlockingExecutor


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    ex = BlockingExecutor("test-broker-config")
    yield ex
    await ex.shutdown()
