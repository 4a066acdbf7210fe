"""pytest plugin (``pytest11`` entry point ``aiorocketmq``): the ``rocketmq_cluster``
fixture.

Owns: the fixture: a factory ``rocketmq_cluster(layout="1m", settings=None)``
that starts a layout on free loopback ports in a temporary directory and returns
a ``ClusterHandle``; every process it started is stopped by PID at teardown.

Must not: hold launcher logic (``aiorocketmq.deploy``) or define other fixtures
whose names could clash with a user's suite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aiorocketmq.testing.handle import ClusterFactory

__all__ = ["rocketmq_cluster"]


@pytest.fixture
def rocketmq_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterFactory]:
    """Factory of real local clusters: ``cluster = rocketmq_cluster("2m-2s-sync")``.

    The handle has ``namesrv_addr``, ``nodes`` (role, address per node),
    ``kill(node)``, ``stop(node)``, ``restart(node)``, ``wait_registered()``,
    ``wait_caught_up()`` and ``status()``; see ``aiorocketmq.testing.ClusterHandle``.
    """
    factory = ClusterFactory(lambda name: tmp_path_factory.mktemp(name, numbered=True))
    yield factory
    factory.close()
