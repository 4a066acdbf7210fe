"""Settings shared by every producer and consumer of a client instance.

Owns: ``ClientConfig`` (Java's ``ClientConfig`` keys in snake_case, with the
camelCase key as alias), building the client id (``ip@instanceName``), and finding
this host's IP the way Java's ``RemotingUtil.getLocalAddress`` prefers: a
non-loopback IPv4 address, else loopback.

Must not: read the environment (``namesrvAddr`` comes from the caller).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic.alias_generators import to_camel

from aiorocketmq.common.msg_id import build_client_id
from aiorocketmq.remoting.acl_sign import SessionCredentials
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.tls import TlsConfig

__all__ = [
    "ClientConfig",
    "LitePullConsumerConfig",
    "ProducerConfig",
    "PullConsumerConfig",
    "PushConsumerConfig",
    "local_ip",
]


def local_ip() -> str:
    """This host's outward IPv4 address, or ``127.0.0.1`` when it has none.

    A UDP ``connect`` sends nothing; it only asks the kernel which source address
    it would route from.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never answered, never sent to
            address = str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"
    return address if address and not address.startswith("0.") else "127.0.0.1"


class ClientConfig(BaseModel):
    """A client instance's settings (Java ``ClientConfig``; intervals in ms)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    namesrv_addr: str = Field(description="Name servers, ``host:port;host:port``.")
    client_ip: str = Field(default_factory=local_ip, description="IP used in the client id.")
    instance_name: str = Field(
        "DEFAULT", description="Second half of the client id; DEFAULT becomes the pid."
    )
    unit_name: str | None = Field(None, description="Appended to the client id when set.")
    poll_name_server_interval: int = Field(
        30_000, ge=1, description="Route refresh period (ms) of every used topic."
    )
    heartbeat_broker_interval: int = Field(
        30_000, ge=1, description="Heartbeat period (ms) to every broker."
    )
    persist_consumer_offset_interval: int = Field(
        5_000, ge=1, description="Consumer offset persistence period (ms)."
    )
    mq_client_api_timeout: int = Field(
        3_000, ge=1, description="Timeout (ms) of name-server and broker admin requests."
    )
    remoting: RemotingClientConfig = Field(
        default_factory=RemotingClientConfig,
        description="aiorocketmq: the remoting client (connect timeout, header serialization).",
    )
    access_key: str | None = Field(
        None,
        description=(
            "ACL AccessKey: with secretKey, every request is signed (Java's AclClientRPCHook "
            "over SessionCredentials)."
        ),
    )
    secret_key: SecretStr | None = Field(
        None, description="ACL SecretKey (never sent, never logged)."
    )
    security_token: str | None = Field(
        None, description="ACL SecurityToken, sent and signed when set."
    )
    use_tls: bool = Field(
        False,
        alias="useTLS",
        description="Connect to name servers and brokers with TLS (Java's useTLS / tls.enable).",
    )
    tls: TlsConfig | None = Field(
        None,
        description=(
            "aiorocketmq: TLS client settings (tls.client.authServer, trustCertPath, "
            "certPath, keyPath...); None: those of ``remoting``."
        ),
    )

    @model_validator(mode="after")
    def _tls_into_remoting(self) -> ClientConfig:
        # The remoting client reads use_tls/tls from ``remoting``: copy ours there once,
        # so ClientConfig(use_tls=True) is all a user writes.
        update: dict[str, object] = {}
        if self.use_tls and not self.remoting.use_tls:
            update["use_tls"] = True
        if self.tls is not None and self.tls != self.remoting.tls:
            update["tls"] = self.tls
        if update:
            # Frozen model: set the derived field directly, during validation only.
            object.__setattr__(self, "remoting", self.remoting.model_copy(update=update))
        return self

    @model_validator(mode="after")
    def _credentials_pair(self) -> ClientConfig:
        if bool(self.access_key) != bool(self.secret_key and self.secret_key.get_secret_value()):
            raise ValueError("accessKey and secretKey go together: set both or neither")
        return self

    def credentials(self) -> SessionCredentials | None:
        """The ACL credentials requests are signed with, or None (unsigned)."""
        if not self.access_key or self.secret_key is None:
            return None
        return SessionCredentials(
            self.access_key, self.secret_key.get_secret_value(), self.security_token
        )

    def client_id(self) -> str:
        """``ip@instanceName[@unitName]``, with DEFAULT replaced by the process id."""
        return build_client_id(
            self.client_ip, self.instance_name, os.getpid(), unit_name=self.unit_name
        )

    def instance_key(self) -> tuple[str, str]:
        """What client instances are shared by: (name-server list, client id)."""
        return (self.namesrv_addr, self.client_id())


class ProducerConfig(BaseModel):
    """A producer's settings (Java ``DefaultMQProducer``; times in ms, sizes in bytes)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    create_topic_key: str = Field(
        "TBW102", description="Topic whose route a send to a new topic borrows."
    )
    default_topic_queue_nums: int = Field(
        4, ge=1, description="Queues a topic auto-created by a send gets."
    )
    send_msg_timeout: int = Field(3_000, ge=1, description="Time budget (ms) of one send.")
    compress_msg_body_over_howmuch: int = Field(
        4_096, ge=0, description="Bodies of at least this many bytes are zlib-compressed."
    )
    zip_compress_level: int = Field(5, ge=0, le=9, description="zlib level of compression.")
    retry_times_when_send_failed: int = Field(
        2, ge=0, description="Extra attempts of a sync send, each on another broker if any."
    )
    retry_times_when_send_async_failed: int = Field(
        2, ge=0, description="Extra attempts of an async send."
    )
    retry_another_broker_when_not_store_ok: bool = Field(
        False, description="Retry a send whose status is not SEND_OK."
    )
    max_message_size: int = Field(
        4 * 1024 * 1024, ge=1, description="Largest body (or batch body) accepted."
    )
    unit_mode: bool = Field(False, description="Unit mode flag sent in headers.")


class PullConsumerConfig(BaseModel):
    """A pull consumer's settings (Java ``DefaultMQPullConsumer``; times in ms)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    message_model: Literal["CLUSTERING", "BROADCASTING"] = Field(
        "CLUSTERING", description="Offsets on the brokers (CLUSTERING) or in a local file."
    )
    broker_suspend_max_time_millis: int = Field(
        20_000, ge=0, description="How long a broker may hold a blocking pull."
    )
    consumer_timeout_millis_when_suspend: int = Field(
        30_000, ge=1, description="Timeout of a blocking pull (longer than the hold)."
    )
    consumer_pull_timeout_millis: int = Field(
        10_000, ge=1, description="Timeout of a non-blocking pull."
    )
    offset_store_dir: Path = Field(
        default_factory=lambda: Path.home() / ".rocketmq_offsets",
        description="BROADCASTING offsets directory (rocketmq.client.localOffsetStoreDir).",
    )
    unit_mode: bool = Field(False, description="Unit mode flag sent in heartbeats.")


class PushConsumerConfig(BaseModel):
    """A push consumer's settings (Java ``DefaultMQPushConsumer``; times in ms)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    message_model: Literal["CLUSTERING", "BROADCASTING"] = Field(
        "CLUSTERING", description="Queues shared by the group (CLUSTERING) or all read by each."
    )
    consume_from_where: Literal[
        "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"
    ] = Field("CONSUME_FROM_LAST_OFFSET", description="Start of a queue without an offset.")
    consume_timestamp_ms: int | None = Field(
        None, description="CONSUME_FROM_TIMESTAMP's time; None: half an hour before start."
    )
    consume_thread_min: int = Field(
        20,
        ge=1,
        le=1000,
        description=(
            "Java's core size of the consume thread pool, reported as such in running "
            "info; unset, it follows consumeThreadMax when that is below 20."
        ),
    )
    consume_thread_max: int = Field(
        20,
        ge=1,
        le=1000,
        description=(
            "Batches consumed at the same time, and the threads a plain def listener "
            "runs on (async listeners stay on the loop). Java's pool, whose queue is "
            "unbounded, never grows past consumeThreadMin; both default to 20."
        ),
    )
    consume_message_batch_max_size: int = Field(1, ge=1, description="Messages per listener call.")
    pull_batch_size: int = Field(32, ge=1, le=1024, description="Messages asked per pull.")
    pull_threshold_for_queue: int = Field(
        1_000, ge=1, description="Pulls of a queue pause while it holds this many messages."
    )
    pull_threshold_size_for_queue: int = Field(
        100, ge=1, description="... or this many MiB of bodies."
    )
    consume_concurrently_max_span: int = Field(
        2_000, ge=1, description="... or (concurrent) offsets this far apart."
    )
    max_reconsume_times: int = Field(
        -1, ge=-1, description="Retries before the DLQ; -1: 16 (concurrent), unlimited (orderly)."
    )
    suspend_current_queue_time_millis: int = Field(
        1_000, ge=10, le=30_000, description="Orderly pause after SUSPEND_CURRENT_QUEUE_A_MOMENT."
    )
    broker_suspend_max_time_millis: int = Field(
        15_000, ge=0, description="How long a broker may hold a pull (long polling)."
    )
    consumer_timeout_millis_when_suspend: int = Field(
        30_000, ge=1, description="Timeout of a held pull (longer than the hold)."
    )
    pull_time_delay_millis_when_exception: int = Field(
        3_000, ge=1, description="Pause of a queue's pulls after a failed pull."
    )
    rebalance_interval_millis: int = Field(
        20_000, ge=1, description="Rebalance period (also at once on NOTIFY_CONSUMER_IDS_CHANGED)."
    )
    offset_store_dir: Path = Field(
        default_factory=lambda: Path.home() / ".rocketmq_offsets",
        description="BROADCASTING offsets directory (rocketmq.client.localOffsetStoreDir).",
    )
    unit_mode: bool = Field(False, description="Unit mode flag sent in heartbeats.")

    @model_validator(mode="after")
    def _thread_bounds(self) -> PushConsumerConfig:
        if "consume_thread_min" not in self.model_fields_set:
            # Only consumeThreadMax given (e.g. 4): the core follows it down, rather
            # than failing Java's min <= max check on a default nobody chose.
            object.__setattr__(self, "consume_thread_min", min(20, self.consume_thread_max))
        elif self.consume_thread_min > self.consume_thread_max:
            raise ValueError(
                f"consumeThreadMin ({self.consume_thread_min}) is larger than "
                f"consumeThreadMax ({self.consume_thread_max})"
            )
        return self


class LitePullConsumerConfig(BaseModel):
    """A lite pull consumer's settings (Java ``DefaultLitePullConsumer`` 4.9; times in ms)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid"
    )

    message_model: Literal["CLUSTERING", "BROADCASTING"] = Field(
        "CLUSTERING", description="Queues shared by the group (CLUSTERING) or all read by each."
    )
    consume_from_where: Literal[
        "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"
    ] = Field("CONSUME_FROM_LAST_OFFSET", description="Start of a queue without an offset.")
    consume_timestamp_ms: int | None = Field(
        None, description="CONSUME_FROM_TIMESTAMP's time; None: half an hour before start."
    )
    pull_batch_size: int = Field(10, ge=1, le=1024, description="Messages asked per pull.")
    pull_threshold_for_all: int = Field(
        10_000, ge=1, description="Pulls pause while this many pulled messages wait for poll."
    )
    pull_threshold_for_queue: int = Field(
        1_000, ge=1, description="A queue's pulls pause while it holds this many messages."
    )
    pull_threshold_size_for_queue: int = Field(
        100, ge=1, description="... or this many MiB of bodies."
    )
    poll_timeout_millis: int = Field(
        5_000, ge=0, description="How long poll() waits for messages by default."
    )
    auto_commit: bool = Field(
        True, description="Commit the polled offsets every autoCommitIntervalMillis."
    )
    auto_commit_interval_millis: int = Field(
        5_000, ge=1_000, description="Auto-commit period (Java's minimum is 1 s)."
    )
    broker_suspend_max_time_millis: int = Field(
        20_000, ge=0, description="How long a broker may hold a pull (long polling)."
    )
    consumer_timeout_millis_when_suspend: int = Field(
        30_000, ge=1, description="Timeout of a held pull (longer than the hold)."
    )
    pull_time_delay_millis_when_exception: int = Field(
        1_000, ge=1, description="Pause of a queue's pulls after a failed pull."
    )
    rebalance_interval_millis: int = Field(
        20_000, ge=1, description="Rebalance period (also at once when the group changes)."
    )
    offset_store_dir: Path = Field(
        default_factory=lambda: Path.home() / ".rocketmq_offsets",
        description="BROADCASTING offsets directory (rocketmq.client.localOffsetStoreDir).",
    )
    unit_mode: bool = Field(False, description="Unit mode flag sent in heartbeats.")
