"""gRPC clients as the proxy knows them: their settings, liveness and Telemetry
streams (RocketMQ 5's ``GrpcClientSettingsManager`` and ``GrpcClientChannel``;
specs/grpc-v5.md §4).

Owns: the registry keyed by ``x-mq-client-id``, the settings reply (the client's
settings with the server's values merged in: what the SDKs need to start at all),
and each client's outbound Telemetry queue (settings replies and server commands
such as transaction checks).

Must not: read requests' metadata (the server does) or know the store.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Final

from google.protobuf.duration_pb2 import Duration

from aiorocketmq.common.constants import parse_delay_levels
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc

__all__ = ["ClientRegistry", "ClientState", "SubscriptionDefaults", "merged_settings"]

log = logging.getLogger(__name__)

#: A client silent this long is forgotten (``channelExpiredTimeout``).
CLIENT_EXPIRED_MS: Final = 120_000
#: Auto-renewed (push consumer) messages remembered per client, for its termination.
MAX_TRACKED_HANDLES: Final = 100_000
_PRODUCER_MAX_ATTEMPTS: Final = 3
_RECEIVE_BATCH_SIZE: Final = 32
LONG_POLLING_MS: Final = 20_000


def _duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


@dataclass(frozen=True, slots=True)
class SubscriptionDefaults:
    """What a consumer group's settings reply carries from the broker."""

    max_attempts: int
    fifo: bool


def merged_settings(
    sent: pb.Settings, max_body_size: int, group: SubscriptionDefaults | None
) -> pb.Settings:
    """The settings reply (Java's ``GrpcClientSettingsManager``): a producer gets the
    exponential back-off (Node asserts it) and the ``publishing`` limits (Python copies
    ``max_body_size``: a missing one makes every send fail in the SDK); a consumer gets
    its group's attempts, RocketMQ's delay-level back-off, batch size 32 (Node reads it),
    the long-polling time and ``fifo``. Metrics stay off (Python would start an OTLP
    exporter)."""
    out = pb.Settings()
    out.CopyFrom(sent)
    out.metric.CopyFrom(pb.Metric(on=False))
    if sent.HasField("publishing"):
        out.backoff_policy.CopyFrom(
            pb.RetryPolicy(
                max_attempts=_PRODUCER_MAX_ATTEMPTS,
                exponential_backoff=pb.ExponentialBackoff(
                    initial=_duration(10), max=_duration(1000), multiplier=2.0
                ),
            )
        )
        out.publishing.max_body_size = max_body_size
        out.publishing.validate_message_type = True
    elif sent.HasField("subscription"):
        defaults = group or SubscriptionDefaults(max_attempts=17, fifo=False)
        backoff = pb.CustomizedBackoff(next=[_duration(ms) for ms in parse_delay_levels()])
        out.backoff_policy.CopyFrom(
            pb.RetryPolicy(max_attempts=defaults.max_attempts, customized_backoff=backoff)
        )
        out.subscription.receive_batch_size = _RECEIVE_BATCH_SIZE
        out.subscription.long_polling_timeout.CopyFrom(_duration(LONG_POLLING_MS))
        out.subscription.fifo = defaults.fifo
    return out


@dataclass(slots=True)
class ClientState:
    """One client id's last settings, liveness and open Telemetry streams."""

    client_id: str
    settings: pb.Settings | None = None
    group: str = ""
    last_seen_ms: int = 0
    streams: list[asyncio.Queue[rpc.TelemetryCommand | None]] = field(default_factory=list)
    #: Receipt handle -> group of messages it received with ``auto_renew`` (a push
    #: consumer's) and has not acked or nacked: made visible again when it goes.
    in_flight: dict[str, str] = field(default_factory=dict)

    def track(self, handles: list[str], group: str) -> None:
        """Remember auto-renewed handles (up to ``MAX_TRACKED_HANDLES``)."""
        for handle in handles:
            if len(self.in_flight) >= MAX_TRACKED_HANDLES:
                log.warning("client %s: too many messages in flight to track", self.client_id)
                return
            self.in_flight[handle] = group

    @property
    def producer_topics(self) -> set[str]:
        """Topics of its publishing settings (a transaction check's targets)."""
        if self.settings is None or not self.settings.HasField("publishing"):
            return set()
        return {t.name for t in self.settings.publishing.topics}


class ClientRegistry:
    """The proxy's clients, keyed by client id."""

    def __init__(self) -> None:
        self._clients: dict[str, ClientState] = {}

    def touch(self, client_id: str, now_ms: int) -> ClientState:
        """The client's state, created on first sight; marks it alive."""
        state = self._clients.get(client_id)
        if state is None:
            state = self._clients[client_id] = ClientState(client_id)
        state.last_seen_ms = now_ms
        return state

    def get(self, client_id: str) -> ClientState | None:
        """A known client, or None."""
        return self._clients.get(client_id)

    def remove(self, client_id: str) -> ClientState | None:
        """Forget a client (NotifyClientTermination); its streams end."""
        state = self._clients.pop(client_id, None)
        if state is not None:
            for queue in state.streams:
                queue.put_nowait(None)
        return state

    def producers_of(self, topic: str) -> list[ClientState]:
        """Clients publishing ``topic`` with an open Telemetry stream."""
        return [c for c in self._clients.values() if c.streams and topic in c.producer_topics]

    def expire(self, now_ms: int) -> list[str]:
        """Drop clients silent for ``CLIENT_EXPIRED_MS`` with no open stream."""
        gone = [
            cid
            for cid, c in self._clients.items()
            if not c.streams and now_ms - c.last_seen_ms > CLIENT_EXPIRED_MS
        ]
        for cid in gone:
            del self._clients[cid]
        return gone

    def close_all(self) -> None:
        """End every Telemetry stream (server shutdown)."""
        for state in self._clients.values():
            for queue in state.streams:
                queue.put_nowait(None)

    def __len__(self) -> int:
        return len(self._clients)
