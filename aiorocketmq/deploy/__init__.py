"""Run cluster layouts as local processes (``mqcluster``, the pytest plugin).

Owns: layouts (``layout``), node processes (``process``), the launcher
(``cluster``) and its remoting probes (``probe``).

Must not: import the broker, name-server or client packages: nodes run as the
``mqnamesrv`` / ``mqbroker`` processes and are observed over remoting only.
"""

from aiorocketmq.deploy.cluster import Cluster, ClusterError, NodeStatus, run_sync
from aiorocketmq.deploy.layout import (
    Layout,
    LayoutError,
    NodeSpec,
    load_layout,
    standard_layout,
)
from aiorocketmq.deploy.process import ProcessError

__all__ = [
    "Cluster",
    "ClusterError",
    "Layout",
    "LayoutError",
    "NodeSpec",
    "NodeStatus",
    "ProcessError",
    "load_layout",
    "run_sync",
    "standard_layout",
]
