"""GET_BROKER_CONSUME_STATS's body: every group's consume stats on one broker.

Owns: ``ConsumeStatsList`` (Java's ``ConsumeStatsList``) in fastjson's shape::

    {"brokerAddr": "127.0.0.1:10911",
     "consumeStatsList": [{"<group>": [<ConsumeStats>, ...]}, ...],
     "totalDiff": 42}

one ``ConsumeStats`` per (group, topic), whose ``offsetTable`` keys are queue
objects (fastjson's map keys), so the text is read with ``loads_object_keys``.

Must not: compute the stats (the broker's processor does) or do I/O.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.admin_bodies import Body, ConsumeStats, loads_object_keys

__all__ = ["ConsumeStatsList"]


@dataclass(slots=True)
class ConsumeStatsList:
    """Consume stats of every group of one broker (see the module docstring).

    Attributes:
        broker_addr: the broker's address.
        groups: group -> one ``ConsumeStats`` per topic, in the broker's order.
        total_diff: messages not yet consumed over every group and queue.
    """

    broker_addr: str = ""
    groups: list[tuple[str, list[ConsumeStats]]] = field(default_factory=list)
    total_diff: int = 0

    def encode(self) -> bytes:
        """fastjson's text (sorted keys, queue objects as map keys)."""
        entries = [
            "{" + json.dumps(group) + ":[" + ",".join(s.encode().decode() for s in stats) + "]}"
            for group, stats in self.groups
        ]
        return (
            '{"brokerAddr":' + json.dumps(self.broker_addr)
            + ',"consumeStatsList":[' + ",".join(entries) + "]"
            + ',"totalDiff":' + str(int(self.total_diff)) + "}"
        ).encode()  # fmt: skip

    @classmethod
    def decode(cls, data: Body) -> ConsumeStatsList:
        """Parse fastjson's text. Raises ``RemoteProtocolError``."""
        d = fj.as_dict(loads_object_keys(data), "ConsumeStatsList")
        groups: list[tuple[str, list[ConsumeStats]]] = []
        for entry in d.get("consumeStatsList") or []:
            for group, stats in fj.as_dict(entry, "consumeStatsList").items():
                rows = stats if isinstance(stats, list) else []
                groups.append((str(group), [ConsumeStats.from_json_dict(s) for s in rows]))
        return cls(
            broker_addr=fj.get_str(d, "brokerAddr", ""),
            groups=groups,
            total_diff=fj.get_int(d, "totalDiff", 0),
        )
