"""``mqadmin haStatus``: replication state of every master/slave set (ours; RocketMQ 4.x
has no such command).

Owns: gathering GET_BROKER_RUNTIME_INFO from every node of a cluster (or of one
brokerName) and rendering one row per node: its CommitLog max offset, and for a
slave what the master last saw it acknowledge and how far behind it is.

Keys read (the broker's HA runtime info, ``aiorocketmq.broker.ha.service``):
a master's ``haSlaveNum``, ``haSlaveAddr_i``, ``haSlaveAckOffset_i``,
``haSlaveLag_i``; a slave's ``haConnected`` and ``masterAddr``; everyone's
``commitLogMaxOffset``.

``--json``: ``[{"brokerName", "brokerId", "brokerAddr", "role", "maxOffset",
"ackedOffset", "lag", "reachable", "connected", "slaves"}]``, numbers where the
table has them and null where it shows ``-``; ``connected`` is a slave's, ``slaves``
a master's count.

Must not: change anything on the brokers.
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Mapping
from dataclasses import dataclass

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.commands import UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.common.route import BrokerData

__all__ = ["HARow", "ha_rows", "ha_status", "ha_status_json", "ha_status_text"]

_UNKNOWN = "-"
_DOWN = "DOWN"


@dataclass(frozen=True, slots=True)
class HARow:
    """One node's line."""

    broker_name: str
    broker_id: int
    addr: str
    role: str
    max_offset: str
    acked_offset: str
    lag: str
    connected: str
    #: A master's count of connected slaves (None on a slave's row).
    slaves: int | None = None


def _slave_acks(master: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The master's view: HA connection address -> (acked offset, lag)."""
    acks: dict[str, tuple[str, str]] = {}
    for i in range(int(master.get("haSlaveNum", "0") or 0)):
        addr = master.get(f"haSlaveAddr_{i}", "")
        acks[addr] = (
            master.get(f"haSlaveAckOffset_{i}", _UNKNOWN),
            master.get(f"haSlaveLag_{i}", _UNKNOWN),
        )
    return acks


def ha_rows(data: BrokerData, runtimes: Mapping[str, Mapping[str, str] | None]) -> list[HARow]:
    """Rows of one brokerName; ``runtimes`` maps address -> runtime info (None: down)."""
    master_addr = data.broker_addrs.get(MASTER_ID)
    master = runtimes.get(master_addr) if master_addr else None
    acks = _slave_acks(master) if master else {}
    master_max = master.get("commitLogMaxOffset") if master else None
    rows = []
    for broker_id in sorted(data.broker_addrs):
        addr = data.broker_addrs[broker_id]
        info = runtimes.get(addr)
        max_offset = info.get("commitLogMaxOffset", _UNKNOWN) if info else _DOWN
        if broker_id == MASTER_ID:
            row = HARow(data.broker_name, broker_id, addr, "MASTER", max_offset,
                        _UNKNOWN, _UNKNOWN, f"{len(acks)} slave(s)", len(acks))  # fmt: skip
        else:
            # The master keys slaves by their HA connection's address, which shares
            # the slave's host; one ack per host is matched, else the lag from offsets.
            host = addr.rsplit(":", 1)[0]
            ack = next((v for k, v in acks.items() if k.rsplit(":", 1)[0] == host), None)
            lag = ack[1] if ack else _lag(master_max, max_offset)
            connected = info.get("haConnected", _UNKNOWN) if info else "false"
            row = HARow(data.broker_name, broker_id, addr, "SLAVE", max_offset,
                        ack[0] if ack else _UNKNOWN, lag, connected)  # fmt: skip
        rows.append(row)
    return rows


def _lag(master_max: str | None, slave_max: str) -> str:
    if master_max is None or not master_max.isdigit() or not slave_max.isdigit():
        return _UNKNOWN
    return str(int(master_max) - int(slave_max))


def ha_status_text(rows: list[HARow]) -> str:
    """The table."""
    fmt = "%-16s  %-4s  %-22s  %-7s  %-14s  %-14s  %-12s  %s\n"
    out = [fmt % ("#Broker Name", "#BID", "#Addr", "#Role", "#MaxOffset", "#AckedOffset",
                  "#Lag", "#Connected")]  # fmt: skip
    for r in rows:
        out.append(fmt % (r.broker_name, r.broker_id, r.addr, r.role, r.max_offset,
                          r.acked_offset, r.lag, r.connected))  # fmt: skip
    return "".join(out)


def ha_status_json(rows: list[HARow]) -> list[jr.JsonObject]:
    """The table's rows as JSON objects."""
    return [
        {
            "brokerName": r.broker_name,
            "brokerId": r.broker_id,
            "brokerAddr": r.addr,
            "role": r.role,
            "maxOffset": jr.int_or_none(r.max_offset),
            "ackedOffset": jr.int_or_none(r.acked_offset),
            "lag": jr.int_or_none(r.lag),
            "reachable": r.max_offset != _DOWN,
            "connected": {"true": True, "false": False}.get(r.connected),
            "slaves": r.slaves,
        }
        for r in rows
    ]


async def _runtime(admin: MQAdmin, addr: str) -> dict[str, str] | None:
    try:
        return await admin.fetch_broker_runtime_stats(addr)
    except MQClientError:
        return None


async def ha_status(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``haStatus -c cluster [-b brokerName]``: one row per node of each broker set."""
    if not args.clusterName:
        raise UsageError("haStatus needs -c clusterName")
    rows: list[HARow] = []
    for data in await admin.cluster_brokers(args.clusterName.strip()):
        if args.brokerName and data.broker_name != args.brokerName.strip():
            continue
        runtimes = {a: await _runtime(admin, a) for a in data.broker_addrs.values()}
        rows += ha_rows(data, runtimes)
    write(jr.dump(ha_status_json(rows)) if jr.wants_json(args) else ha_status_text(rows))
