"""``mqadmin doctor`` (ours): what is wrong with a cluster, from where the command runs.

RocketMQ has no such command; users find these problems one support thread at a time
(``specs/ecosystem.md`` §6.2). Checks, each a ``Finding`` (OK, WARN or FAIL):

- ``namesrv``: every name server answers GET_BROKER_CLUSTER_INFO.
- ``registry``: the name servers, which never talk to each other, list the same
  brokers (a broker missing from one is invisible to the clients that ask it).
- ``broker``: every registered address answers from here. The name servers hand that
  address (the broker's ``brokerIP1``) to every client, so a container or NAT
  address that does not answer here does not answer for clients either.
- ``address``: a broker registered a loopback address while the name servers have
  routable ones (clients on other hosts cannot reach it).
- ``disk``: CommitLog disk use against the broker's own thresholds
  (``diskSpaceWarningLevelRatio``: puts refused; ``diskSpaceCleanForciblyRatio`` and
  ``diskMaxUsedSpaceRatio``: files deleted before ``fileReservedTime``).
- ``permission``: a broker whose ``brokerPermission`` does not allow writes.
- ``master`` / ``replication``: each broker set has a master; each slave is
  connected to it, and how many bytes behind it is.
- ``sync``: a SYNC_MASTER has at least one connected slave (its ``haSlaveNum``; for a
  broker that does not report it, the registered slaves that say they are
  connected). Without one every send is answered SLAVE_NOT_AVAILABLE: a FAIL, though
  the master itself is up. A dead slave leaves the name servers at once, so this is
  the only check that sees it.

Output: one line per finding (``#Status #Check #Target #Detail``) and a summary, or
with ``--json`` ``{"findings": [{"status", "check", "target", "detail"}], "ok",
"warn", "fail"}``. Exit code 1 when any check FAILs (after the report), else 0.

Must not: change anything anywhere.
"""

from __future__ import annotations

import asyncio
import ipaddress
from argparse import Namespace
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.broker_commands import fetch_broker_config
from aiorocketmq.admin.commands import Write
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.common.constants import MASTER_ID, PERM_WRITE
from aiorocketmq.common.route import ClusterInfo
from aiorocketmq.remoting.client import split_address

__all__ = [
    "DoctorFailedError",
    "Finding",
    "disk_finding",
    "doctor",
    "registry_findings",
    "replication_findings",
    "sync_master_findings",
]

OK: Final = "OK"
WARN: Final = "WARN"
FAIL: Final = "FAIL"
_ROW: Final = "%-7s %-12s %-36s %s\n"
_BROKER_IP_HINT: Final = (
    "the name servers give clients this address (the broker's brokerIP1); if the broker "
    "runs in a container or behind NAT, set brokerIP1 to an address clients can reach "
    "(and brokerIP2 for its slaves)"
)

#: (brokerName, brokerId) -> address, as the name servers list them.
Brokers = dict[tuple[str, int], str]


class DoctorFailedError(MQClientError):
    """At least one check failed (the report is already written)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One check's verdict on one target."""

    status: str
    check: str
    target: str
    detail: str


async def _views(admin: MQAdmin) -> tuple[list[Finding], dict[str, ClusterInfo]]:
    """Each name server's cluster table (the ones that answered)."""

    async def ask(address: str) -> ClusterInfo | MQClientError:
        try:
            return await admin.namesrv.get_cluster_info(address=address)
        except MQClientError as exc:
            return exc

    addresses = admin.namesrv.addresses
    answers = await asyncio.gather(*(ask(a) for a in addresses))
    findings, views = [], {}
    for address, got in zip(addresses, answers, strict=True):
        if isinstance(got, MQClientError):
            findings.append(Finding(FAIL, "namesrv", address, f"no answer: {got}"))
            continue
        views[address] = got
        count = sum(len(d.broker_addrs) for d in got.broker_addr_table.values())
        clusters = len(got.cluster_addr_table)
        findings.append(
            Finding(OK, "namesrv", address, f"{count} broker(s), {clusters} cluster(s)")
        )
    return findings, views


def _registered(info: ClusterInfo) -> Brokers:
    return {
        (name, bid): addr
        for name, data in info.broker_addr_table.items()
        for bid, addr in data.broker_addrs.items()
    }


def registry_findings(views: Mapping[str, ClusterInfo]) -> tuple[list[Finding], Brokers]:
    """Whether the name servers agree; every broker any of them lists."""
    tables = {ns: _registered(info) for ns, info in views.items()}
    everyone: Brokers = {}
    for table in tables.values():
        for key, addr in table.items():
            everyone.setdefault(key, addr)
    findings = []
    for (name, bid), addr in sorted(everyone.items()):
        missing = [ns for ns, table in tables.items() if table.get((name, bid)) != addr]
        if missing:
            findings.append(Finding(WARN, "registry", f"{name}/{bid} {addr}",
                                    f"missing from name server(s) {', '.join(missing)}: "
                                    "clients asking them do not see it"))  # fmt: skip
    if len(tables) > 1 and not findings:
        findings.append(Finding(OK, "registry", "name servers", f"all {len(tables)} agree"))
    return findings, everyone


def _loopback(address: str) -> bool:
    try:
        host, _port = split_address(address)
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name, or no port
        return address.split(":", 1)[0] == "localhost"


def disk_finding(target: str, runtime: Mapping[str, str], config: Mapping[str, str]) -> Finding:
    """CommitLog disk use (runtime info) against the broker's thresholds (its config)."""
    try:
        ratio = float(runtime["commitLogDiskRatio"])
        refuse = float(config.get("diskSpaceWarningLevelRatio", "0.90"))
        early = min(float(config.get("diskSpaceCleanForciblyRatio", "0.85")),
                    int(config.get("diskMaxUsedSpaceRatio", "75")) / 100)  # fmt: skip
    except (KeyError, ValueError):
        return Finding(WARN, "disk", target, "the broker does not report its disk use")
    used = f"CommitLog disk {ratio:.0%} used"
    if ratio >= refuse:
        return Finding(FAIL, "disk", target, f"{used}: at diskSpaceWarningLevelRatio "
                                             f"({refuse:.0%}) puts are refused")  # fmt: skip
    if ratio >= early:
        return Finding(WARN, "disk", target, f"{used}: above {early:.0%} files are deleted "
                                             "before fileReservedTime")  # fmt: skip
    return Finding(OK, "disk", target, used)


async def _broker(
    admin: MQAdmin, name: str, bid: int, addr: str, routable_namesrv: bool
) -> tuple[list[Finding], dict[str, str] | None, str | None]:
    """Reachability, address, disk and permission of one broker; its runtime table and
    brokerRole (None when unknown)."""
    target = f"{name}/{bid} {addr}"
    try:
        runtime = await admin.fetch_broker_runtime_stats(addr)
    except MQClientError as exc:
        return [Finding(FAIL, "broker", target, f"no answer from here ({exc}); "
                                                f"{_BROKER_IP_HINT}")], None, None  # fmt: skip
    role = "master" if bid == MASTER_ID else "slave"
    findings = [Finding(OK, "broker", target, f"{runtime.get('brokerVersionDesc', '?')} {role}")]
    if _loopback(addr) and routable_namesrv:
        findings.append(Finding(WARN, "address", target, "a loopback address: clients on "
                                                         f"other hosts cannot reach it; "
                                                         f"{_BROKER_IP_HINT}"))  # fmt: skip
    try:
        config, _version = await fetch_broker_config(admin, addr)
    except MQClientError as exc:
        return [*findings, Finding(WARN, "disk", target, f"no broker config: {exc}")], runtime, None
    findings.append(disk_finding(target, runtime, config))
    perm_text = config.get("brokerPermission", "6")
    perm = int(perm_text) if perm_text.strip().isdigit() else PERM_WRITE
    if not perm & PERM_WRITE:
        detail = f"brokerPermission={perm}: no writes; producers skip it"
        findings.append(Finding(WARN, "permission", target, detail))
    return findings, runtime, config.get("brokerRole")


def sync_master_findings(
    brokers: Brokers,
    runtimes: Mapping[str, Mapping[str, str] | None],
    roles: Mapping[str, str | None],
) -> list[Finding]:
    """Each SYNC_MASTER has a connected slave (module docstring's ``sync``)."""
    findings = []
    for (name, bid), addr in sorted(brokers.items()):
        runtime = runtimes.get(addr)
        if bid != MASTER_ID or roles.get(addr) != "SYNC_MASTER" or runtime is None:
            continue
        target = f"{name}/{bid} {addr}"
        reported = runtime.get("haSlaveNum", "")
        if reported.isdigit():
            connected = int(reported)
        else:  # not ours: count the registered slaves that say they are connected
            slaves = [a for (n, b), a in brokers.items() if n == name and b != MASTER_ID]
            connected = sum((runtimes.get(a) or {}).get("haConnected") == "true" for a in slaves)
        if connected == 0:
            findings.append(Finding(FAIL, "sync", target,
                                    "SYNC_MASTER with no connected slave: every send is "
                                    "answered SLAVE_NOT_AVAILABLE; start a slave or make it "
                                    "ASYNC_MASTER"))  # fmt: skip
        else:
            findings.append(Finding(OK, "sync", target, f"SYNC_MASTER, {connected} slave(s) "
                                                        "connected"))  # fmt: skip
    return findings


def replication_findings(
    brokers: Brokers, runtimes: Mapping[str, Mapping[str, str] | None]
) -> list[Finding]:
    """A master per broker set; each slave connected, and its lag in bytes."""
    findings = []
    for name in sorted({n for n, _ in brokers}):
        ids = sorted(b for n, b in brokers if n == name)
        master = brokers.get((name, MASTER_ID))
        if master is None:
            detail = "no master registered: sends to it fail; consumers read its slaves"
            findings.append(Finding(WARN, "master", name, detail))
        master_rt = runtimes.get(master) if master else None
        for bid in (b for b in ids if b != MASTER_ID):
            slave = brokers[(name, bid)]
            slave_rt = runtimes.get(slave)
            target = f"{name}/{bid} {slave}"
            if slave_rt is None:
                continue  # already a FAIL of the broker check
            connected = slave_rt.get("haConnected")
            if connected is None:
                detail = "does not report whether it is connected (not an aiorocketmq broker?)"
                findings.append(Finding(WARN, "replication", target, detail))
                continue
            if connected != "true":
                findings.append(Finding(FAIL, "replication", target,
                                        f"not connected to its master {master or '?'}: can it "
                                        "reach the master's HA port (listenPort+1, haMasterAddress"
                                        "/brokerIP2)?"))  # fmt: skip
                continue
            behind = ""
            try:
                if master_rt is not None:
                    lag = int(master_rt["commitLogMaxOffset"]) - int(slave_rt["commitLogMaxOffset"])
                    behind = f", {max(lag, 0)} bytes behind"
            except (KeyError, ValueError):
                pass
            findings.append(Finding(OK, "replication", target, f"connected to {master}{behind}"))
    return findings


async def doctor(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``doctor``: run every check, write the report; fail when any check failed.

    Raises:
        DoctorFailedError: at least one FAIL (after the report is written).
    """
    findings, views = await _views(admin)
    registry, brokers = registry_findings(views)
    findings += registry
    routable = any(not _loopback(ns) for ns in admin.namesrv.addresses)
    checked = await asyncio.gather(
        *(
            _broker(admin, name, bid, addr, routable)
            for (name, bid), addr in sorted(brokers.items())
        )
    )
    runtimes, roles = {}, {}
    for ((_name, _bid), addr), (found, runtime, role) in zip(sorted(brokers.items()), checked,
                                                               strict=True):  # fmt: skip
        findings += found
        runtimes[addr], roles[addr] = runtime, role
    findings += replication_findings(brokers, runtimes)
    findings += sync_master_findings(brokers, runtimes, roles)
    counts = {s: sum(f.status == s for f in findings) for s in (OK, WARN, FAIL)}
    if jr.wants_json(args):
        write(jr.dump({"findings": [asdict(f) for f in findings], "ok": counts[OK],
                       "warn": counts[WARN], "fail": counts[FAIL]}))  # fmt: skip
    else:
        write(_ROW % ("#Status", "#Check", "#Target", "#Detail"))
        write("".join(_ROW % (f.status, f.check, f.target, f.detail) for f in findings))
        write(f"\n{len(findings)} checks: {counts[OK]} OK, {counts[WARN]} WARN, "
              f"{counts[FAIL]} FAIL\n")  # fmt: skip
    if counts[FAIL]:
        raise DoctorFailedError(f"{counts[FAIL]} check(s) failed")
