"""InstanceMember: what producers and consumers share about joining a ClientInstance.

Owns: the group name checks (RocketMQ's group rules and the reserved
``DEFAULT_PRODUCER`` / ``DEFAULT_CONSUMER``), resolving the client config from a
name-server address (``NAMESRV_ADDR`` when none is given, as Java's
``ClientConfig`` does), joining a shared or private ``ClientInstance`` and registering
the group in it (refused when the group is already registered there, as Java),
leaving it, and ``async with``.

Must not: hold producer or consumer behaviour (the subclasses do).
"""

from __future__ import annotations

import os
from types import TracebackType
from typing import Literal, Self

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import ClientStateError, InvalidArgumentError
from aiorocketmq.client.instance import ClientInstance, ClientManager
from aiorocketmq.common.validators import validate_group

__all__ = ["NAMESRV_ADDR_ENV", "InstanceMember", "namesrv_addr_from_env"]

NAMESRV_ADDR_ENV = "NAMESRV_ADDR"
"""Java's ``NameServerAddressUtils`` reads this variable when no address is set."""


def namesrv_addr_from_env() -> str | None:
    """``NAMESRV_ADDR`` stripped, or None when unset or blank."""
    value = os.environ.get(NAMESRV_ADDR_ENV, "").strip()
    return value or None


Role = Literal["producer", "consumer"]


class InstanceMember:
    """Base of Producer, PullConsumer and PushConsumer.

    Args:
        role: ``producer`` or ``consumer`` (which registry, which reserved group).
        group: the producer or consumer group.
        namesrv_addr: ``;``-separated name servers, when ``client_config`` is None;
            None reads ``NAMESRV_ADDR``, as Java's ``ClientConfig``.
        client_config: the client's settings (client id, name servers...).
        manager: shares one instance per client id between members; None: a
            private instance started and stopped with this member.

    Raises:
        InvalidArgumentError: a bad or reserved group, or no name servers given.
    """

    def __init__(
        self,
        role: Role,
        group: str,
        namesrv_addr: str | None,
        client_config: ClientConfig | None,
        manager: ClientManager | None,
    ) -> None:
        remark = validate_group(group)
        if remark is not None:
            raise InvalidArgumentError(remark)
        reserved = f"DEFAULT_{role.upper()}"  # MixAll's reserved default groups
        if group == reserved:
            raise InvalidArgumentError(
                f"{role}Group can not equal {reserved}, please specify another one."
            )
        if client_config is None:
            if namesrv_addr is None:
                namesrv_addr = namesrv_addr_from_env()
            if namesrv_addr is None:
                raise InvalidArgumentError(
                    "namesrv_addr or client_config is required (or set "
                    f"{NAMESRV_ADDR_ENV}='host:port;host:port', as Java's ClientConfig reads it)"
                )
            client_config = ClientConfig(namesrv_addr=namesrv_addr)
        self._role: Role = role
        self.group = group
        self.client_config = client_config
        self._manager = manager
        self._instance: ClientInstance | None = None

    @property
    def instance(self) -> ClientInstance:
        """The client instance (raises ``ClientStateError`` before ``start``)."""
        if self._instance is None:
            raise ClientStateError(f"{self._role} {self.group} is not started")
        return self._instance

    async def _acquire(self) -> ClientInstance:
        """Join (or start) the instance and register this group in it.

        Raises:
            ClientStateError: the group is already registered in that instance.
        """
        if self._manager is not None:
            instance = await self._manager.acquire(self.client_config)
        else:
            instance = ClientInstance(self.client_config)
            await instance.start()
        if not self._register(instance):
            await self._release(instance)
            raise ClientStateError(
                f"The {self._role} group[{self.group}] has been created before, "
                "specify another name"
            )
        return instance

    def _register(self, instance: ClientInstance) -> bool:
        """Register this group in ``instance``; False when it already is there."""
        raise NotImplementedError

    async def _release(self, instance: ClientInstance) -> None:
        """Leave ``instance`` (the manager stops it with its last member)."""
        if self._manager is not None:
            await self._manager.release(instance)
        else:
            await instance.shutdown()

    async def start(self) -> None:
        """Start the member (subclasses)."""
        raise NotImplementedError

    async def shutdown(self) -> None:
        """Stop the member (subclasses; idempotent)."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()
