"""NamesrvConfig: the name server's settings, under RocketMQ's property names.

Owns: ``NamesrvConfig`` (RocketMQ 4.9.8's ``NamesrvConfig`` keys with their
defaults, plus the listen address of ``NettyServerConfig`` with the name server's
9876, plus the liveness timers, which Java hard-codes and we make settable) and
``load_namesrv_config``, which splits one ``namesrv.properties`` mapping between
``NamesrvConfig`` and the remoting server's ``RemotingServerConfig``, as Java's
``NamesrvStartup`` fills both objects from the same file (the ``tls.*`` keys go
to the remoting config's ``tls``). A key no model
knows is reported back (the CLI warns); a bad value raises ``ConfigError`` naming
the key.

Must not: read the environment or the file system (the CLI does, and expands
``~`` in paths), or hold state. Models are frozen.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from aiorocketmq.common.settings import ConfigError, model_keys, validate_settings
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.tls import TLS_KEYS, tls_config_from_properties

__all__ = ["ConfigError", "NamesrvConfig", "config_items", "load_namesrv_config"]

_IMPORTANT: Final[dict[str, Any]] = {"important": True}


class NamesrvConfig(BaseModel):
    """Settings of ``mqnamesrv`` (a ``namesrv.properties`` loads unchanged)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    rocketmq_home: str = Field(
        "", description="ROCKETMQ_HOME (RocketMQ reads the environment; our CLI does)."
    )
    kv_config_path: str = Field(
        "~/namesrv/kvConfig.json",
        description="File of the KV config table (ORDER_TOPIC_CONFIG...); '~' is expanded.",
        json_schema_extra=_IMPORTANT,
    )
    config_store_path: str = Field(
        "~/namesrv/namesrv.properties",
        description="Where RocketMQ stores runtime config updates (kept for compatibility).",
    )
    product_env_name: str = Field("center", description="Environment name (cluster tests).")
    cluster_test: bool = Field(False, description="RocketMQ's cluster-test mode (not used).")
    order_message_enable: bool = Field(
        False,
        description="Fill a route's orderTopicConf from the ORDER_TOPIC_CONFIG KV namespace.",
        json_schema_extra=_IMPORTANT,
    )
    config_black_list: str = Field(
        "configBlackList;configStorePath;kvConfigPath",
        description="';'-separated keys that UPDATE_NAMESRV_CONFIG may not change.",
    )
    listen_port: int = Field(
        9876,
        ge=0,
        le=65535,
        description="TCP port (NettyServerConfig.listenPort); 0 picks a free one.",
        json_schema_extra=_IMPORTANT,
    )
    listen_host: str = Field("0.0.0.0", description="aiorocketmq: address to bind.")
    metrics_port: int = Field(
        5558,
        ge=-1,
        le=65535,
        description=(
            "aiorocketmq: port of the Prometheus /metrics endpoint (the broker's is 5557); "
            "0 turns it off, -1 picks a free port (logged)."
        ),
    )
    route_by_client_network: bool = Field(
        False,
        description=(
            "aiorocketmq: answer a client on one of the name server's own networks (or on "
            "loopback) each broker at the address its registration came from, everyone "
            "else brokerIP1 (namesrv/client_network.py): for Docker bridge networks, "
            "where host clients and containers reach a broker at different addresses."
        ),
    )
    broker_scan_interval_millis: int = Field(
        10_000, ge=1, description="aiorocketmq: period of the broker expiry scan (ms); Java: 10 s."
    )
    broker_scan_initial_delay_millis: int = Field(
        5_000, ge=0, description="aiorocketmq: delay before the first expiry scan (ms); Java: 5 s."
    )
    broker_channel_expired_millis: int = Field(
        120_000,
        ge=1,
        description=(
            "aiorocketmq: a broker silent this long is dropped (ms); Java's "
            "BROKER_CHANNEL_EXPIRED_TIME, 120 s. Brokers register every 30 s."
        ),
    )

    def remoting_config(self, base: RemotingServerConfig | None = None) -> RemotingServerConfig:
        """The remoting server's settings, listening where this config says."""
        base = base or RemotingServerConfig()
        return base.model_copy(
            update={"listen_port": self.listen_port, "listen_host": self.listen_host}
        )


def load_namesrv_config(
    properties: Mapping[str, str], overrides: Mapping[str, Any] | None = None
) -> tuple[NamesrvConfig, RemotingServerConfig, list[str]]:
    """Build both models from one ``namesrv.properties`` mapping.

    Args:
        properties: Keys and values of the file (Java or snake_case names).
        overrides: Values that win over the file (command-line flags), by
            NamesrvConfig field name.

    Returns:
        ``(namesrv_config, remoting_config, unknown_keys)``; the remoting config
        already listens on the name server's host and port.

    Raises:
        ConfigError: A value does not fit its setting; the message names the key.
    """
    namesrv_keys = model_keys(NamesrvConfig)
    remoting_keys = model_keys(RemotingServerConfig) - {"listenPort", "listen_port"}
    remoting_keys -= {"listenHost", "listen_host", "tls"}
    known = namesrv_keys | remoting_keys | TLS_KEYS
    unknown = sorted(k for k in properties if k not in known)
    namesrv_values: dict[str, Any] = {k: v for k, v in properties.items() if k in namesrv_keys}
    for name, value in (overrides or {}).items():
        field = NamesrvConfig.model_fields[name]
        namesrv_values.pop(field.alias or name, None)
        namesrv_values[name] = value
    if "metricsPort" not in namesrv_values and "metrics_port" not in namesrv_values:
        port = namesrv_values.get("listen_port", namesrv_values.get("listenPort"))
        if str(port).strip() == "0":
            # A name server on a free port (tests, launchers) gets a free /metrics port
            # too: two of them must not race for 5558.
            namesrv_values["metrics_port"] = -1
    namesrv = validate_settings(NamesrvConfig, namesrv_values)
    remoting = validate_settings(
        RemotingServerConfig, {k: v for k, v in properties.items() if k in remoting_keys}
    )
    remoting = remoting.model_copy(update={"tls": tls_config_from_properties(properties)})
    return namesrv, namesrv.remoting_config(remoting), unknown


def config_items(*models: BaseModel) -> Iterator[tuple[str, object]]:
    """``(javaName, value)`` of every setting of ``models``, in field order.

    What ``mqnamesrv --print-config`` and GET_NAMESRV_CONFIG show; a key that two
    models share is shown once, from the first.
    """
    seen: set[str] = set()
    for model in models:
        for name, field in type(model).model_fields.items():
            key = field.alias or name
            if key not in seen and not field.exclude:  # tls: not shown, as Java
                seen.add(key)
                yield key, getattr(model, name)
