"""A pytest plugin for users' integration tests: real clusters on loopback.

Registered through the ``pytest11`` entry point (``aiorocketmq.testing.plugin``),
so installing aiorocketmq makes the ``rocketmq_cluster`` fixture available::

    def test_failover(rocketmq_cluster):
        cluster = rocketmq_cluster("2m-2s-sync")
        cluster.kill("broker-a")          # SIGKILL
        cluster.restart("broker-a")
        cluster.wait_caught_up()

Owns: the fixture and the handle it yields (``ClusterHandle``). Must not: start
processes itself: the launcher is ``aiorocketmq.deploy`` (one implementation).
"""

from aiorocketmq.testing.handle import SMALL_FILES, ClusterFactory, ClusterHandle, NodeInfo

__all__ = ["SMALL_FILES", "ClusterFactory", "ClusterHandle", "NodeInfo"]
