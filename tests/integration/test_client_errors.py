"""The client's errors as a Python user catches them, against a real ``mqnamesrv``.

A name server behind a stalled link (a TCP proxy that holds every byte) does not
answer in time: the client raises ``MQTimeoutError``, which ``except TimeoutError``
catches as it catches ``asyncio.timeout``'s, and which ``aiorocketmq.client``
exports. Once the link heals, the same call answers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import MQRemotingError, MQTimeoutError, NamesrvAPI, NoRouteError
from tests.support.cluster import start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.timeout(60)

StartProcess = Callable[..., ManagedProcess]


async def test_a_stalled_name_server_is_a_timeout_error(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    proxy = await TcpProxy(namesrv).start()
    api = NamesrvAPI(proxy.address, timeout_ms=300)
    try:
        proxy.pause()
        with pytest.raises(TimeoutError) as caught:  # plain Python, no client import needed
            await api.get_route("AnyTopic", address=proxy.address)
        assert isinstance(caught.value, MQTimeoutError)
        assert isinstance(caught.value, MQRemotingError) and caught.value.retriable
        assert caught.value.address == proxy.address
        proxy.heal()
        with pytest.raises(NoRouteError):  # answered now: the topic has no route
            await api.get_route("AnyTopic", address=proxy.address)
    finally:
        await api.close()
        await proxy.close()
