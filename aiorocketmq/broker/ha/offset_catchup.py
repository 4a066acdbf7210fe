"""SlaveOffsetCatchUp: a master learns the consumer and delay offsets its slaves hold.

Owns: the master's side of issue 24. While a master is down its consumers pull
from the slave and commit their offsets there (the client commits to the master
when it can, to a slave otherwise). A restarted master still holds its own older
offsets, so a consumer that starts then would be sent back to them and receive
everything consumed during the outage again. A *round* fixes that:

1. find the slaves: GET_BROKER_CLUSTER_INFO (106) on every name server, the
   addresses of this ``brokerName`` with a brokerId other than 0 (any name
   server's answer counts; their union is used);
2. ask each slave for GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45),
   the codes a Java slave answers too, all at once;
3. take the largest offset per ``topic@group`` and queue over the slaves, and
   raise the master's offset to it, never lowering one and never past the
   master's own max offset of that queue (``ConsumerOffsetManager.
   merge_from_slaves``); delay levels likewise (``ScheduleMessageService.
   merge_slave_offsets``). What changed is persisted and logged in one line.

A round runs when the master starts (requested before its server accepts
connections) and whenever a slave's HA connection sends its first report (a
slave that reconnects may have taken commits while it was cut off). Requests
during a round make one more round after it.

While a round is pending or running, QUERY_CONSUMER_OFFSET waits for it
(``wait_caught_up``), at most ``slaveOffsetCatchUpTimeoutMillis``; the round
itself is bounded by the same time. A wait that times out is logged once per
round and counted, and the query is answered from the master's own table.

Must not: lower an offset, block the loop, fail the broker when a slave or a
name server does not answer (that round is logged and ends), or import
``aiorocketmq.client``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aiorocketmq.broker.offsets import (
    ConsumerOffsetManager,
    MaxOffset,
    RaisedOffset,
    merge_offset_tables,
)
from aiorocketmq.common.admin_bodies import (
    ConsumerOffsetSerializeWrapper,
    DelayOffsetSerializeWrapper,
)
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.route import ClusterInfo
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.errors import RemotingError
from aiorocketmq.runtime.lifecycle import Service

__all__ = ["CatchUpReport", "DelayOffsetMerger", "SlaveOffsetCatchUp", "merge_delay_tables"]

log = logging.getLogger(__name__)

#: Raises a master's delay levels to the slaves' (largest) table; what was raised
#: as ``(level, before, after)``.
DelayOffsetMerger = Callable[[dict[int, int]], list[tuple[int, int, int]]]

_CALL_ERRORS = (RemotingError, OSError, RemoteProtocolError)


def merge_delay_tables(tables: Sequence[dict[int, int]]) -> dict[int, int]:
    """The largest offset per delay level over several slaves' tables."""
    merged: dict[int, int] = {}
    for table in tables:
        for level, offset in table.items():
            if offset > merged.get(level, -1):
                merged[level] = offset
    return merged


@dataclass(slots=True)
class CatchUpReport:
    """What one round did.

    Attributes:
        reason: why it ran ("master start", "slave connected 127.0.0.1:52100").
        slaves: the slave addresses the name servers listed.
        answered: those that sent both tables.
        failed: address -> why, for those that did not.
        raised: consumer offsets raised.
        delay_raised: ``(level, before, after)`` of delay levels raised.
        timed_out: the round hit its bound (what it had merged stays merged).
    """

    reason: str
    slaves: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    raised: list[RaisedOffset] = field(default_factory=list)
    delay_raised: list[tuple[int, int, int]] = field(default_factory=list)
    timed_out: bool = False


class SlaveOffsetCatchUp(Service):
    """Rounds of learning the slaves' offsets; see the module docstring.

    Args:
        broker_name: this master's ``brokerName`` (its slaves share it).
        namesrv_addrs: the name servers, read at each round.
        own_addr: this broker's address (left out of the slaves found).
        offsets: the master's consumer offsets.
        max_offset: the master's max offset of a queue (the cap).
        delay_offsets: raises delay levels (None: consumer offsets only).
        timeout_ms: bound of a round and of a query's wait; 0 turns rounds off.
        client_config: the broker's remoting client settings (TLS...).

    Attributes:
        rounds: rounds finished.
        raised_total: consumer offsets raised over all rounds.
        gate_timeouts: queries answered before a round finished.
        last_report: the last round's report (None before the first).
    """

    def __init__(
        self,
        *,
        broker_name: str,
        namesrv_addrs: Callable[[], Sequence[str]],
        own_addr: Callable[[], str],
        offsets: ConsumerOffsetManager,
        max_offset: MaxOffset,
        delay_offsets: DelayOffsetMerger | None = None,
        timeout_ms: int,
        client_config: RemotingClientConfig | None = None,
    ) -> None:
        if timeout_ms < 0:
            raise ValueError(f"slaveOffsetCatchUpTimeoutMillis must be >= 0, got {timeout_ms}")
        super().__init__("SlaveOffsetCatchUp")
        self._broker_name = broker_name
        self._namesrv_addrs = namesrv_addrs
        self._own_addr = own_addr
        self._offsets = offsets
        self._max_offset = max_offset
        self._delay_offsets = delay_offsets
        self._timeout_ms = timeout_ms
        self._client = RemotingClient(client_config)
        self._idle = asyncio.Event()
        self._idle.set()
        self._wanted = asyncio.Event()
        self._reasons: list[str] = []
        self._gate_logged = False
        self.rounds = 0
        self.raised_total = 0
        self.gate_timeouts = 0
        self.last_report: CatchUpReport | None = None

    @property
    def enabled(self) -> bool:
        """Whether rounds run at all (``slaveOffsetCatchUpTimeoutMillis`` > 0)."""
        return self._timeout_ms > 0

    @property
    def caught_up(self) -> bool:
        """No round pending or running: queries are answered at once."""
        return self._idle.is_set()

    def request(self, reason: str) -> None:
        """Ask for a round; queries wait from now on until it has run (bounded).

        Plain ``def``: called from the HA read loop and before the service starts
        (the start's own round is requested before the server accepts clients).
        """
        if not self.enabled or self.stopping.is_set():
            return
        self._reasons.append(reason)
        self._idle.clear()
        self._wanted.set()

    def on_slave_connected(self, addr: str) -> None:
        """HA listener: a slave (re)connected and reported its offset."""
        self.request(f"slave connected {addr}")

    async def wait_caught_up(self) -> bool:
        """Wait until no round is pending, at most the timeout.

        Returns:
            True when caught up; False when the wait timed out (logged once per
            round: the caller answers from the master's own table).
        """
        if self._idle.is_set():
            return True
        try:
            async with asyncio.timeout(self._timeout_ms / 1000):
                await self._idle.wait()
        except TimeoutError:
            self.gate_timeouts += 1
            if not self._gate_logged:
                self._gate_logged = True
                log.warning(
                    "QUERY_CONSUMER_OFFSET answered before the slave offset catch-up "
                    "finished (waited %d ms): offsets consumed on a slave may be re-delivered",
                    self._timeout_ms,
                )
            return False
        return True

    async def on_start(self) -> None:
        """Run requested rounds one after another."""
        self.spawn(self._loop(), name="slave-offset-catch-up")

    async def on_shutdown(self) -> None:
        """Release waiting queries and close the connections."""
        self._idle.set()
        await self._client.close()

    async def _loop(self) -> None:
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            reasons, self._reasons = self._reasons, []
            self._gate_logged = False
            await self.run_round(", ".join(dict.fromkeys(reasons)) or "requested")
            if not self._wanted.is_set():
                self._idle.set()

    async def run_round(self, reason: str) -> CatchUpReport:
        """One round now, bounded by the timeout; logged, never raises for a peer.

        Returns:
            What it did (also kept as ``last_report``).
        """
        report = CatchUpReport(reason)
        try:
            async with asyncio.timeout(self._timeout_ms / 1000 if self.enabled else None):
                await self._collect_and_merge(report)
        except TimeoutError:
            report.timed_out = True
        self.rounds += 1
        self.raised_total += len(report.raised)
        self.last_report = report
        _log_report(report, self._timeout_ms)
        return report

    async def _collect_and_merge(self, report: CatchUpReport) -> None:
        report.slaves = await self._slave_addresses()
        answers = await asyncio.gather(*(self._tables_of(a, report) for a in report.slaves))
        tables = [a for a in answers if a is not None]
        # Merge only once every slave answered or failed: a round that times out
        # halfway leaves the master as it was rather than half-merged.
        report.raised = self._offsets.merge_from_slaves(
            merge_offset_tables(t[0] for t in tables), self._max_offset
        )
        if report.raised:
            self._offsets.request_persist()
        if self._delay_offsets is not None and tables:
            report.delay_raised = self._delay_offsets(merge_delay_tables([t[1] for t in tables]))

    async def _slave_addresses(self) -> list[str]:
        """This brokerName's slaves as the name servers know them (union)."""
        namesrvs = list(self._namesrv_addrs())
        infos = await asyncio.gather(*(self._cluster_info(n) for n in namesrvs))
        own = self._own_addr()
        found: dict[str, None] = {}
        for info in infos:
            data = None if info is None else info.broker_addr_table.get(self._broker_name)
            if data is None:
                continue
            for broker_id, addr in sorted(data.broker_addrs.items()):
                if broker_id != MASTER_ID and addr != own:
                    found[addr] = None
        return list(found)

    async def _cluster_info(self, namesrv: str) -> ClusterInfo | None:
        try:
            body = await self._call(namesrv, RequestCode.GET_BROKER_CLUSTER_INFO)
            return ClusterInfo.decode(body)
        except _CALL_ERRORS as exc:
            log.warning("catch-up: name server %s gave no cluster info: %s", namesrv, exc)
            return None

    async def _tables_of(
        self, addr: str, report: CatchUpReport
    ) -> tuple[dict[str, dict[int, int]], dict[int, int]] | None:
        try:
            consumer, delay = await asyncio.gather(
                self._call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET),
                self._call(addr, RequestCode.GET_ALL_DELAY_OFFSET),
            )
            tables = (
                ConsumerOffsetSerializeWrapper.decode(consumer).offset_table,
                DelayOffsetSerializeWrapper.decode(delay).offset_table,
            )
        except _CALL_ERRORS as exc:
            report.failed[addr] = str(exc) or type(exc).__name__
            return None
        report.answered.append(addr)
        return tables

    async def _call(self, addr: str, code: int) -> bytes:
        reply = await self._client.invoke(
            addr, RemotingCommand.request(code), max(self._timeout_ms, 1)
        )
        if reply.code != ResponseCode.SUCCESS:
            raise RemotingError(f"request {code}: code={reply.code} remark={reply.remark}")
        return bytes(reply.body)


def _log_report(report: CatchUpReport, timeout_ms: int) -> None:
    sample = ", ".join(
        f"{r.topic}@{r.group}[{r.queue_id}] {r.before}->{r.after}" for r in report.raised[:5]
    )
    level = logging.WARNING if report.failed or report.timed_out else logging.INFO
    log.log(
        level,
        "slave offset catch-up reason=%s slaves=%s answered=%d failed=%s raised=%d%s "
        "delay_raised=%s timed_out=%s",
        report.reason,
        report.slaves,
        len(report.answered),
        report.failed or "{}",
        len(report.raised),
        f" ({sample}{', ...' if len(report.raised) > 5 else ''})" if sample else "",
        report.delay_raised,
        f"after {timeout_ms} ms" if report.timed_out else "no",
    )
