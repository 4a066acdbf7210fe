"""Settings of the remoting server and client.

Owns: ``RemotingServerConfig`` and ``RemotingClientConfig``, pydantic models whose
field names are the snake_case of RocketMQ's ``NettyServerConfig`` /
``NettyClientConfig`` keys, with the camelCase key as alias, so the same
``.properties`` lines work. Settings RocketMQ lacks are marked "aiorocketmq".

Must not: read the environment (the CLI does) or do I/O.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from aiorocketmq.remoting.frame import DEFAULT_MAX_FRAME_LENGTH
from aiorocketmq.remoting.tls import TlsConfig


class _RemotingModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )


class RemotingServerConfig(_RemotingModel):
    """How a remoting server listens and how much it lets one connection hold."""

    listen_host: str = Field("0.0.0.0", description="aiorocketmq: address to bind.")
    listen_port: int = Field(8888, ge=0, le=65535, description="TCP port; 0 picks a free one.")
    server_channel_max_idle_time_seconds: int = Field(
        120, description="Close a connection that sent nothing for this long (s); 0 = never."
    )
    server_oneway_semaphore_value: int = Field(
        256, ge=1, description="Oneway requests the server may have outstanding to clients."
    )
    server_async_semaphore_value: int = Field(
        64, ge=1, description="Requests the server may have in flight to clients at once."
    )
    frame_max_length: int = Field(
        DEFAULT_MAX_FRAME_LENGTH, ge=1024, description="Largest frame in bytes, length included."
    )
    max_in_flight_per_connection: int = Field(
        4096,
        ge=1,
        description=(
            "aiorocketmq: requests of one connection being processed (held long polls "
            "included); past it the server stops reading that socket until some finish."
        ),
    )
    write_buffer_high_water: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="aiorocketmq: bytes queued to a slow peer before reading from it pauses.",
    )
    max_connections: int = Field(
        16_384,
        ge=1,
        description=(
            "aiorocketmq: open connections served at once; a connection beyond it gets "
            "SYSTEM_BUSY for its first request and is closed (silent ones after 2 s)."
        ),
    )
    tls: TlsConfig = Field(
        default_factory=TlsConfig,
        exclude=True,
        description="The tls.* settings (tls.server.mode...); loaded from their own keys.",
    )


class RemotingClientConfig(_RemotingModel):
    """How a remoting client connects and bounds its outstanding requests."""

    serialize_type: Literal["AUTO", "JSON", "ROCKETMQ", "MSGPACK"] = Field(
        "AUTO",
        description=(
            "Header serialization of our requests (RocketMQ: rocketmq.serialize.type). "
            "AUTO speaks JSON until the server says it reads MSGPACK (only aiorocketmq "
            "servers do), then MSGPACK, measured faster end to end; see the README."
        ),
    )
    connect_timeout_millis: int = Field(3000, ge=1, description="TCP connect timeout (ms).")
    client_async_semaphore_value: int = Field(
        65535, ge=1, description="Requests awaiting a reply, over all connections."
    )
    client_oneway_semaphore_value: int = Field(
        65535, ge=1, description="Oneway requests being written, over all connections."
    )
    client_channel_max_idle_time_seconds: int = Field(
        120, description="Close a connection idle for this long (s); 0 = never."
    )
    frame_max_length: int = Field(
        DEFAULT_MAX_FRAME_LENGTH, ge=1024, description="Largest frame in bytes, length included."
    )
    write_buffer_high_water: int = Field(
        4 * 1024 * 1024, ge=1024, description="aiorocketmq: bytes queued before writers wait."
    )
    use_tls: bool = Field(
        False, alias="useTLS", description="Connect with TLS (NettyClientConfig.useTLS)."
    )
    tls: TlsConfig = Field(
        default_factory=TlsConfig,
        exclude=True,
        description="The tls.client.* settings used when use_tls is on.",
    )
