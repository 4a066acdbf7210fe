"""GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25).

Owns: RocketMQ 4.9.8's ``AdminBrokerProcessor.getBrokerConfig`` /
``updateBrokerConfig`` and the part of ``Configuration`` they use (the
properties view, its ``DataVersion``, ``update`` and ``persist``).

* 26: the body is every setting as ``key=value`` lines (``MixAll.properties2String``;
  unset values are left out, as Java skips nulls); the reply header ``version`` is
  the configuration's data version as JSON (``GetBrokerConfigResponseHeader``).
* 25: the body is properties text. A key listed in ``configBlackList`` is refused
  (NO_PERMISSION, naming the key), a value that does not fit its setting is refused
  (SYSTEM_ERROR naming key and value), anything else is taken: validated
  copies replace ``ctx.config`` and ``ctx.store_config`` (processors read them per
  request, so they apply at once; keys no model knows are kept, as Java's
  Properties keeps them); every key shows in the next GET_BROKER_CONFIG and the
  data version moves on; when the broker has a config file, the updated keys are
  merged into it (``common.config_update``: the file keeps its other keys, such as
  the ``tls.*`` and Netty ones the view does not show).

Must not: restart services (a setting read only at start stays as it was until
the next start, as in Java), or block the loop (the file write goes to a thread).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from aiorocketmq.broker.config import BrokerConfig, BrokerSettings
from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.common.config_update import (
    black_listed,
    merge_into_properties_file,
    parse_update_body,
)
from aiorocketmq.common.properties_file import format_properties
from aiorocketmq.common.settings import ConfigError, model_keys, validate_settings
from aiorocketmq.common.topic_config import DataVersion
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.store.config import MessageStoreConfig

__all__ = ["BrokerConfigProcessor"]

log = logging.getLogger(__name__)

_M = TypeVar("_M", bound=BaseModel)


class BrokerConfigProcessor:
    """Handles GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG.

    Args:
        ctx: the broker's parts (``ctx.config`` is replaced on update).
        settings: the settings the broker started with (the initial view).
        config_path: the broker's properties file, or None (updates stay in memory).

    Attributes:
        config_path: where updates are persisted (settable after construction).
        data_version: the configuration's version; each update moves it on.
    """

    def __init__(
        self, ctx: BrokerContext, settings: BrokerSettings, config_path: Path | None = None
    ) -> None:
        self._ctx = ctx
        self.config_path = config_path
        self._values: dict[str, object] = {
            k: v for k, v in settings.items() if v is not None and v != ""
        }
        self.data_version = DataVersion(ctx.clock.now_ms(), 0)

    def register(self, table: ProcessorTable) -> None:
        """Register GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG."""
        table.register(RequestCode.GET_BROKER_CONFIG, self.get_broker_config)
        table.register(RequestCode.UPDATE_BROKER_CONFIG, self.update_broker_config)

    def properties_text(self) -> str:
        """The current view as ``key=value`` lines (``MixAll.properties2String``)."""
        return format_properties(self._values)

    def get_broker_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_CONFIG: the settings text, header ``version``."""
        body = self.properties_text().encode("utf-8")
        version = self.data_version.encode().decode("utf-8")
        return request.response_to(ResponseCode.SUCCESS, None, {"version": version}, body)

    async def update_broker_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: check, apply, persist; SUCCESS or a remark why not."""
        try:
            updates = parse_update_body(request.body)
        except ValueError as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, str(exc))
        refused = black_listed(updates, self._ctx.config.config_black_list)
        if refused:
            remark = f"Can not update config in black list: {', '.join(refused)}"
            return request.response_to(ResponseCode.NO_PERMISSION, remark)
        try:
            new_config = _merged(BrokerConfig, self._ctx.config, updates, model_keys(BrokerConfig))
            store_keys = MessageStoreConfig.known_keys()
            new_store = _merged(MessageStoreConfig, self._ctx.store_config, updates, store_keys)
        except ConfigError as exc:
            return request.response_to(ResponseCode.SYSTEM_ERROR, str(exc))
        self._ctx.config = new_config
        self._ctx.store_config = new_store
        self._values.update(updates)
        self.data_version = self.data_version.next_version(self._ctx.clock.now_ms())
        log.info("broker config updated keys=%s", ",".join(sorted(updates)))
        if self.config_path is not None:
            try:
                await asyncio.to_thread(merge_into_properties_file, self.config_path, updates)
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                remark = f"updated, but persisting to {self.config_path} failed: {exc}"
                return request.response_to(ResponseCode.SYSTEM_ERROR, remark)
        return request.response_to(ResponseCode.SUCCESS, None)


def _merged(model: type[_M], current: _M, updates: dict[str, str], keys: Iterable[str]) -> _M:
    """``current`` with the ``updates`` it knows applied (validated; ConfigError names the key)."""
    known = set(keys)
    values = current.model_dump(by_alias=True)
    values.update({k: v for k, v in updates.items() if k in known})
    return validate_settings(model, values)
