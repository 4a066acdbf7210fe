"""BrokerConfig: the broker's own settings, under RocketMQ 4.9.8's property names.

Owns: ``BrokerConfig`` (every key of ``common/.../BrokerConfig.java`` a
``broker.conf`` may carry, with Java's defaults; ``@ImportantField`` keys carry
``{"important": True}`` schema metadata) and ``load_broker_settings``, which
splits ONE properties mapping between ``BrokerConfig``, ``MessageStoreConfig``
and ``RemotingServerConfig`` as ``BrokerStartup`` fills its four objects from the
same file (the ``tls.*`` keys go to both remoting configs' ``tls``; the client's
``useTLS`` follows BrokerStartup), then applies BrokerStartup's fix-ups
(listenPort 10911, haListenPort = listenPort + 1, master brokerId 0, slave
brokerId > 0). ``render_settings`` gives the ``mqbroker -p`` / ``-m`` text.

Must not: read the environment or the file system (the CLI reads the file,
resolves brokerIP1/brokerIP2 to the primary local IPv4 and reads
ROCKETMQ_HOME / NAMESRV_ADDR), or hold state. Models are frozen. The one
exception is the ``brokerName`` default: the host name, as Java's
``localHostName()``, or ``"DEFAULT_BROKER"`` when it cannot be read.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from aiorocketmq.common.constants import PERM_READ, PERM_WRITE, RMQ_SYS_TRACE_TOPIC
from aiorocketmq.common.properties_file import format_properties
from aiorocketmq.common.settings import ConfigError, model_keys, validate_settings
from aiorocketmq.remoting.config import RemotingClientConfig, RemotingServerConfig
from aiorocketmq.remoting.tls import TLS_KEYS, tls_config_from_properties
from aiorocketmq.store.config import BrokerRole, MessageStoreConfig

__all__ = [
    "BROKER_LISTEN_PORT",
    "BrokerConfig",
    "BrokerSettings",
    "ConfigError",
    "is_important",
    "load_broker_settings",
    "render_settings",
]

_IMPORTANT: Final[JsonDict] = {"important": True}
BROKER_LISTEN_PORT: Final = 10911
"""BrokerStartup sets NettyServerConfig.listenPort to 10911 before reading the file."""
DEFAULT_BROKER_NAME: Final = "DEFAULT_BROKER"
REGISTER_PERIOD_MIN_MS: Final = 10_000
REGISTER_PERIOD_MAX_MS: Final = 60_000

NETTY_IGNORED_KEYS: Final = frozenset(
    {
        # NettyServerConfig / NettyClientConfig keys with no meaning on asyncio.
        "serverWorkerThreads", "serverCallbackExecutorThreads", "serverSelectorThreads",
        "serverSocketSndBufSize", "serverSocketRcvBufSize", "serverSocketBacklog",
        "serverPooledByteBufAllocatorEnable", "useEpollNativeSelector",
        "writeBufferHighWaterMark", "writeBufferLowWaterMark",
        "clientWorkerThreads", "clientCallbackExecutorThreads", "channelNotActiveInterval",
        "clientSocketSndBufSize", "clientSocketRcvBufSize", "clientPooledByteBufAllocatorEnable",
        "clientCloseSocketIfTimeout",
    }
)  # fmt: skip
"""RocketMQ keys a broker.conf may carry that we accept and ignore (reported apart)."""


def _local_host_name() -> str:
    # BrokerConfig.localHostName(): InetAddress.getLocalHost().getHostName(), else DEFAULT_BROKER.
    try:
        return socket.gethostname() or DEFAULT_BROKER_NAME
    except OSError:
        return DEFAULT_BROKER_NAME


def _f(default: Any, description: str, *, important: bool = False, alias: str | None = None) -> Any:
    extra = _IMPORTANT if important else None
    return Field(default, description=description, json_schema_extra=extra, alias=alias)


class BrokerConfig(BaseModel):
    """Settings of ``mqbroker`` (``BrokerConfig`` in RocketMQ 4.9.8; frozen).

    Thread-pool sizes and queue capacities are accepted (a stock file may carry
    them) but have no effect: requests run on one event loop.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    rocketmq_home: str | None = _f(None, "ROCKETMQ_HOME (the CLI reads the environment).")
    namesrv_addr: str | None = _f(
        None, "Name servers, ';'-separated host:port list (NAMESRV_ADDR).", important=True
    )
    broker_ip1: str | None = _f(
        None,
        "Address registered for clients; None = the primary local IPv4 (resolved by the CLI).",
        important=True,
        alias="brokerIP1",
    )
    broker_ip2: str | None = _f(
        None, "Address of the HA server; None = the primary local IPv4.", alias="brokerIP2"
    )
    broker_name: str = Field(
        default_factory=_local_host_name,
        description="Broker name (master and slaves share it); default: the host name.",
        json_schema_extra=_IMPORTANT,
    )
    broker_cluster_name: str = _f("DefaultCluster", "Cluster name.", important=True)
    broker_id: int = Field(
        0, ge=0, description="0 = master, > 0 = slave.", json_schema_extra=_IMPORTANT
    )
    broker_permission: int = _f(PERM_READ | PERM_WRITE, "Broker perm (4 R, 2 W; default 6).")
    default_topic_queue_nums: int = Field(
        8, ge=1, description="Queues of auto-created topics (TBW102's queue count)."
    )
    auto_create_topic_enable: bool = _f(True, "Create unknown topics on send.", important=True)
    cluster_topic_enable: bool = _f(True, "Create a topic named after the cluster.")
    broker_topic_enable: bool = _f(True, "Create a topic named after the broker.")
    auto_create_subscription_group: bool = _f(
        True, "Create unknown subscription groups on use.", important=True
    )
    message_store_plug_in: str = _f("", "Store plug-ins (unsupported).")
    msg_trace_topic_name: str = _f(RMQ_SYS_TRACE_TOPIC, "Trace topic.", important=True)
    trace_topic_enable: bool = _f(False, "Create the trace topic at start.", important=True)
    send_message_thread_pool_nums: int = _f(4, "Java thread pool (no effect).")
    put_message_future_thread_pool_nums: int = _f(4, "Java thread pool (no effect).")
    pull_message_thread_pool_nums: int = _f(32, "Java thread pool (no effect).")
    process_reply_message_thread_pool_nums: int = _f(32, "Java thread pool (no effect).")
    query_message_thread_pool_nums: int = _f(16, "Java thread pool (no effect).")
    admin_broker_thread_pool_nums: int = _f(16, "Java thread pool (no effect).")
    client_manage_thread_pool_nums: int = _f(32, "Java thread pool (no effect).")
    consumer_manage_thread_pool_nums: int = _f(32, "Java thread pool (no effect).")
    heartbeat_thread_pool_nums: int = _f(8, "Java thread pool (no effect).")
    end_transaction_thread_pool_nums: int = _f(24, "Java thread pool (no effect).")
    flush_consumer_offset_interval: int = Field(
        5_000, ge=1, description="Period of consumerOffset.json persistence (ms)."
    )
    flush_consumer_offset_history_interval: int = _f(
        60_000,
        "Period of config/consumerOffsetHistory.jsonl snapshots (ms; <= 0 turns the history "
        "and mqadmin lag's history off; unused by 4.9.8).",
    )
    reject_transaction_message: bool = _f(False, "Refuse transaction messages.", important=True)
    fetch_namesrv_addr_by_address_server: bool = _f(
        False, "Fetch name servers from an address server (unsupported).", important=True
    )
    send_thread_pool_queue_capacity: int = _f(10_000, "Java queue (no effect).")
    put_thread_pool_queue_capacity: int = _f(10_000, "Java queue (no effect).")
    pull_thread_pool_queue_capacity: int = _f(100_000, "Java queue (no effect).")
    reply_thread_pool_queue_capacity: int = _f(10_000, "Java queue (no effect).")
    query_thread_pool_queue_capacity: int = _f(20_000, "Java queue (no effect).")
    client_manager_thread_pool_queue_capacity: int = _f(1_000_000, "Java queue (no effect).")
    consumer_manager_thread_pool_queue_capacity: int = _f(1_000_000, "Java queue (no effect).")
    heartbeat_thread_pool_queue_capacity: int = _f(50_000, "Java queue (no effect).")
    end_transaction_pool_queue_capacity: int = _f(100_000, "Java queue (no effect).")
    filter_server_nums: int = _f(0, "Filter servers (unsupported).")
    long_polling_enable: bool = _f(True, "Hold pulls on empty queues (long polling).")
    metrics_port: int = Field(
        5557,
        ge=-1,
        le=65535,
        description=(
            "aiorocketmq: port of the Prometheus /metrics endpoint (RocketMQ 5's "
            "metricsPromExporterPort default); 0 turns it off, -1 picks a free port (logged)."
        ),
    )
    grpc_listen_port: int = Field(
        8081,
        ge=-1,
        le=65535,
        description=(
            "aiorocketmq: port of RocketMQ 5's gRPC messaging endpoint (the proxy in local "
            "mode, aiorocketmq.proxy; RocketMQ 5's grpcServerPort default 8081); 0 turns it "
            "off, -1 picks a free port (the ready line says which). Unset with listenPort=0, "
            "a free port too."
        ),
    )
    pop_auto_renew_invisible_time_millis: int = Field(
        60_000,
        ge=10_000,
        description=(
            "aiorocketmq: invisible time of a message received by a push consumer over gRPC "
            "(auto_renew; RocketMQ 5's defaultInvisibleTimeMills). It is not renewed: a "
            "listener slower than this sees the message again."
        ),
    )
    short_polling_time_mills: int = Field(
        1_000, ge=0, description="Hold of a pull when long polling is off (ms)."
    )
    notify_consumer_ids_changed_enable: bool = _f(True, "Tell a group's clients it changed.")
    high_speed_mode: bool = _f(False, "Unused.")
    commercial_enable: bool = _f(True, "Commercial stats (unused).")
    commercial_timer_count: int = _f(1, "Commercial stats (unused).")
    commercial_trans_count: int = _f(1, "Commercial stats (unused).")
    commercial_big_count: int = _f(1, "Commercial stats (unused).")
    commercial_base_count: int = _f(1, "Commercial stats (unused).")
    transfer_msg_by_heap: bool = _f(True, "Java: copy pull bodies on the heap (no effect).")
    max_delay_time: int = _f(40, "Unused.")
    region_id: str = _f("DefaultRegion", "Trace region id.")
    register_broker_timeout_mills: int = Field(
        6_000, ge=1, description="Timeout of one REGISTER_BROKER call (ms)."
    )
    slave_read_enable: bool = _f(False, "Let consumers read from slaves when lagging.")
    disable_consume_if_consumer_read_slowly: bool = _f(
        False, "Disable a group whose lag exceeds consumerFallbehindThreshold."
    )
    consumer_fallbehind_threshold: int = _f(16 * 1024**3, "Lag threshold (bytes).")
    broker_fast_failure_enable: bool = _f(True, "Fail queued requests fast under pressure.")
    wait_time_mills_in_send_queue: int = _f(200, "Fast-failure wait, send queue (ms).")
    wait_time_mills_in_pull_queue: int = _f(5_000, "Fast-failure wait, pull queue (ms).")
    wait_time_mills_in_heartbeat_queue: int = _f(31_000, "Fast-failure wait (ms).")
    wait_time_mills_in_transaction_queue: int = _f(3_000, "Fast-failure wait (ms).")
    start_accept_send_request_time_stamp: int = _f(0, "Refuse sends before this time (ms).")
    trace_on: bool = _f(True, "Broker-side tracing switch.")
    enable_calc_filter_bit_map: bool = _f(False, "SQL92 filter bitmaps (unsupported).")
    expect_consumer_num_use_filter: int = _f(32, "Bloom filter sizing (unsupported).")
    max_error_rate_of_bloom_filter: int = _f(20, "Bloom filter error rate %.")
    filter_data_clean_time_span: int = _f(24 * 3600 * 1000, "Filter data expiry (ms).")
    filter_support_retry: bool = _f(False, "SQL92 filter on retry topics (unsupported).")
    enable_property_filter: bool = _f(False, "SQL92 property filter (unsupported).")
    compressed_register: bool = _f(False, "Send REGISTER_BROKER bodies zlib-compressed.")
    force_register: bool = _f(True, "Register even when the topic table did not change.")
    register_name_server_period: int = _f(
        30_000, "Period of registration with name servers (ms), clamped to 10000..60000."
    )
    transaction_time_out: int = _f(6_000, "Half message check delay (ms).", important=True)
    transaction_check_max: int = _f(15, "Checks before a half message is dropped.", important=True)
    transaction_check_interval: int = _f(
        60_000, "Period of the transaction check (ms).", important=True
    )
    max_held_pull_requests: int = Field(
        100_000,
        ge=1,
        description=(
            "aiorocketmq: long-polling pulls held at once, over all connections; one "
            "more is answered SYSTEM_BUSY at once (the client retries later)."
        ),
    )
    slave_offset_catch_up_timeout_millis: int = Field(
        3_000,
        ge=0,
        description=(
            "aiorocketmq: on a master, the longest a round of learning its slaves' consumer "
            "and delay offsets may take (ms), and so the longest QUERY_CONSUMER_OFFSET waits "
            "for it after a start or a slave's reconnect; 0 turns the catch-up off."
        ),
    )
    max_batch_message_nums: int = Field(
        10_000,
        ge=1,
        description=(
            "aiorocketmq: messages in one batch send; more is MESSAGE_ILLEGAL (the "
            "whole batch body is also bounded by maxMessageSize)."
        ),
    )
    max_properties_size: int = Field(
        32_767,
        ge=1,
        le=32_767,
        description=(
            "aiorocketmq: UTF-8 bytes of a message's properties (the CommitLog's 2-byte "
            "length caps it at 32767); more is MESSAGE_ILLEGAL."
        ),
    )
    acl_enable: bool = _f(
        False,
        "Check every request against plain ACL (plain_acl.yml): accounts, signatures, "
        "white lists, per-topic and per-group permissions.",
        important=True,
    )
    acl_plain_file: str = _f(
        "conf/plain_acl.yml",
        "aiorocketmq: the plain ACL file (Java: -Drocketmq.acl.plain.file), relative to "
        "rocketmqHome; every *.yml under rocketmqHome/conf/acl is read too.",
    )
    acl_file_watch_interval_millis: int = Field(
        5_000,
        ge=10,
        description="aiorocketmq: how often the ACL files are checked for changes (ms).",
    )
    store_reply_message_enable: bool = _f(True, "Store request-reply messages.")
    enable_detail_stat: bool = _f(True, "Detailed stats.")
    auto_delete_unused_stats: bool = _f(False, "Drop stats of unused topics.")
    isolate_log_enable: bool = _f(False, "Per-broker log isolation (no effect).")
    config_black_list: str = _f(
        "configBlackList;brokerConfigPath", "';'-separated keys UPDATE_BROKER_CONFIG may not set."
    )

    @field_validator("register_name_server_period")
    @classmethod
    def _clamp_register_period(cls, value: int) -> int:
        # BrokerController: Math.max(10000, Math.min(registerNameServerPeriod, 60000)).
        return max(REGISTER_PERIOD_MIN_MS, min(value, REGISTER_PERIOD_MAX_MS))

    @property
    def namesrv_addr_list(self) -> list[str]:
        """``namesrvAddr`` split at ``;`` (blanks dropped); empty when unset."""
        if not self.namesrv_addr:
            return []
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]


def is_important(field_info: Any) -> bool:
    """Whether a pydantic field is one of RocketMQ's ``@ImportantField`` keys."""
    extra = field_info.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get("important"))


@dataclass(frozen=True, slots=True)
class BrokerSettings:
    """Everything one broker properties file configures.

    Attributes:
        broker: BrokerConfig.
        store: MessageStoreConfig (haListenPort already fixed up).
        remoting: RemotingServerConfig (listening on listenPort).
        client: RemotingClientConfig (calls to name servers; NettyClientConfig).
        unknown_keys: Keys no model knows (the CLI warns, naming each).
        ignored_keys: Netty keys accepted without effect (``NETTY_IGNORED_KEYS``).
    """

    broker: BrokerConfig
    store: MessageStoreConfig
    remoting: RemotingServerConfig
    client: RemotingClientConfig = field(default_factory=RemotingClientConfig)
    unknown_keys: list[str] = field(default_factory=list)
    ignored_keys: list[str] = field(default_factory=list)

    def items(self, important_only: bool = False) -> Iterator[tuple[str, object]]:
        """``(javaName, value)`` of every setting, broker first, each key once."""
        seen: set[str] = set()
        for model in (self.broker, self.remoting, self.client, self.store):
            for name, info in type(model).model_fields.items():
                key = info.alias or name
                if info.exclude:
                    continue  # tls: not printed (Java prints none; keyPassword stays private)
                if key in seen or (important_only and not is_important(info)):
                    continue
                seen.add(key)
                yield key, getattr(model, name)


def render_settings(settings: BrokerSettings, important_only: bool = False) -> str:
    """The text of ``mqbroker -p`` (every setting) or ``-m`` (the important ones)."""
    items = [(k, "" if v is None else v) for k, v in settings.items(important_only)]
    return format_properties(items)


def load_broker_settings(
    properties: Mapping[str, str], overrides: Mapping[str, Any] | None = None
) -> BrokerSettings:
    """Build the broker's three models from one properties mapping, as BrokerStartup.

    Args:
        properties: Keys and values of the file (Java or snake_case names).
        overrides: BrokerConfig values that win over the file (``-n`` and the
            like), by field name.

    Returns:
        The settings; ``unknown_keys`` lists keys no model knows,
        ``ignored_keys`` the Netty keys accepted without effect.

    Raises:
        ConfigError: A value does not fit its setting (the message names the
            key), DLedger is enabled, or brokerId does not fit brokerRole.
    """
    broker_keys = model_keys(BrokerConfig)
    store_keys = MessageStoreConfig.known_keys()
    remoting_keys = model_keys(RemotingServerConfig)
    client_keys = model_keys(RemotingClientConfig)
    remoting_keys -= {"tls"}
    client_keys -= {"tls"}
    known = broker_keys | store_keys | remoting_keys | client_keys | NETTY_IGNORED_KEYS | TLS_KEYS
    unknown = sorted(k for k in properties if k not in known)
    broker_values = {k: v for k, v in properties.items() if k in broker_keys}
    for name, value in (overrides or {}).items():
        info = BrokerConfig.model_fields[name]
        broker_values.pop(info.alias or name, None)
        broker_values[name] = value
    remoting_values: dict[str, Any] = {"listenPort": BROKER_LISTEN_PORT}
    remoting_values.update({k: v for k, v in properties.items() if k in remoting_keys})
    tls = tls_config_from_properties(properties)
    remoting_values["tls"] = tls
    remoting = validate_settings(RemotingServerConfig, remoting_values)
    store = validate_settings(
        MessageStoreConfig, {k: v for k, v in properties.items() if k in store_keys}
    )
    broker = validate_settings(BrokerConfig, broker_values)
    # BrokerStartup: useTLS = tls.enable, unset: tls.server.mode == enforcing; the file wins.
    client_values: dict[str, Any] = {"useTLS": tls.client_enabled(), "tls": tls}
    client_values.update({k: v for k, v in properties.items() if k in client_keys})
    client = validate_settings(RemotingClientConfig, client_values)
    settings = _fix_up(broker, store, remoting, properties)
    ignored = sorted(k for k in properties if k in NETTY_IGNORED_KEYS)
    return dataclasses.replace(settings, client=client, unknown_keys=unknown, ignored_keys=ignored)


def _fix_up(
    broker: BrokerConfig,
    store: MessageStoreConfig,
    remoting: RemotingServerConfig,
    properties: Mapping[str, str],
) -> BrokerSettings:
    if store.enable_d_leger_commit_log:
        raise ConfigError("enableDLegerCommitLog=true: DLedger is not supported")
    if store.broker_role is BrokerRole.SLAVE:
        if broker.broker_id <= 0:
            raise ConfigError(f"brokerId={broker.broker_id}: a SLAVE's brokerId must be > 0")
    elif broker.broker_id != 0:
        # BrokerStartup forces a master's brokerId to MASTER_ID.
        broker = broker.model_copy(update={"broker_id": 0})
    if "haListenPort" not in properties and "ha_listen_port" not in properties:
        # Java forces listenPort + 1 even when the file sets it; we honour an explicit value.
        # listenPort=0 (a free port, tests and launchers) gets a free HA port too.
        ha_port = remoting.listen_port + 1 if remoting.listen_port else 0
        store = store.model_copy(update={"ha_listen_port": ha_port})
    if remoting.listen_port == 0 and not {"metricsPort", "metrics_port"} & properties.keys():
        # Likewise /metrics: two such brokers (a test suite's) must not race for 5557.
        broker = broker.model_copy(update={"metrics_port": -1})
    grpc_keys = {"grpcListenPort", "grpc_listen_port"}
    if remoting.listen_port == 0 and not grpc_keys & properties.keys():
        # The gRPC endpoint too: such brokers (a test suite's) must not race for 8081.
        broker = broker.model_copy(update={"grpc_listen_port": -1})
    return BrokerSettings(broker, store, remoting)
