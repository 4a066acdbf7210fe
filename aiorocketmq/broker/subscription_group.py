"""SubscriptionGroupManager: consumer groups' settings and ``subscriptionGroup.json``.

Owns: the table group -> ``SubscriptionGroupConfig`` and its ``DataVersion``
(bumped on every change), the system groups RocketMQ 4.9.8's ``init()``
creates (TOOLS_CONSUMER, FILTERSRV_CONSUMER, SELF_TEST_C_GROUP, and the ONS
groups with broadcast on), auto-creation on lookup when
``autoCreateSubscriptionGroup`` is on or the group starts with ``CID_RMQ_SYS_``,
admin update/delete/disable.

Must not: do file I/O on the loop (``request_persist`` writes in the executor).

File form: ``{"dataVersion":{...},"subscriptionGroupTable":{"<group>":{...}}}``.
Groups from the file are put over the system ones (Java ``putAll``).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.config_manager import ConfigManager
from aiorocketmq.common import fastjson
from aiorocketmq.common.clock import Clock
from aiorocketmq.common.subscription_group import (
    SYSTEM_CONSUMER_GROUPS,
    SubscriptionGroupConfig,
    is_sys_consumer_group,
)
from aiorocketmq.common.topic_config import DataVersion
from aiorocketmq.runtime import BlockingExecutor

__all__ = ["SubscriptionGroupManager", "SubscriptionGroupTable"]

log = logging.getLogger(__name__)

SubscriptionGroupTable = tuple[dict[str, SubscriptionGroupConfig], DataVersion]


class SubscriptionGroupManager(ConfigManager[SubscriptionGroupTable]):
    """The subscription-group table (``SubscriptionGroupManager``).

    Args:
        path: ``<storePathRootDir>/config/subscriptionGroup.json``.
        executor: Where file work runs; not owned.
        broker_config: For ``autoCreateSubscriptionGroup``.
        clock: Wall clock of the data version.
    """

    def __init__(
        self, path: Path, executor: BlockingExecutor, broker_config: BrokerConfig, clock: Clock
    ) -> None:
        super().__init__(path, executor)
        self._cfg = broker_config
        self._clock = clock
        self.data_version = DataVersion(clock.now_ms(), 0)
        # Java's init() leaves TOOLS/FILTERSRV/SELF_TEST with the class default
        # (broadcast on) -- only the ONS groups set it explicitly; same result.
        self._table: dict[str, SubscriptionGroupConfig] = {
            g: SubscriptionGroupConfig(g) for g in SYSTEM_CONSUMER_GROUPS
        }

    # -- file form -------------------------------------------------------------------

    def encode(self, pretty: bool = False) -> str:
        """The file's (or GET_ALL_SUBSCRIPTIONGROUP_CONFIG's) JSON."""
        doc = {
            "dataVersion": self.data_version.to_json_dict(),
            "subscriptionGroupTable": {k: v.to_json_dict() for k, v in self._table.items()},
        }
        return fastjson.dumps_pretty(doc) if pretty else fastjson.dumps(doc)

    def parse(self, text: str) -> SubscriptionGroupTable:
        """Read the file. Raises ``RemoteProtocolError``."""
        doc = fastjson.loads_object(text, str(self.path))
        raw = fastjson.as_dict(doc.get("subscriptionGroupTable") or {}, "subscriptionGroupTable")
        table = {g: SubscriptionGroupConfig.from_json_dict(c, g) for g, c in raw.items()}
        version = doc.get("dataVersion")
        return table, DataVersion() if version is None else DataVersion.from_json_dict(version)

    def apply(self, table: SubscriptionGroupTable) -> None:
        """Put the file's groups over the system ones; take its data version."""
        self._table.update(table[0])
        self.data_version = table[1]

    # -- reads and changes -------------------------------------------------------------

    def subscription_group_table(self) -> dict[str, SubscriptionGroupConfig]:
        """A copy of the table."""
        return dict(self._table)

    def contains(self, group: str) -> bool:
        """Whether ``group`` has a config (no auto-creation)."""
        return group in self._table

    def _changed(self) -> None:
        self.data_version = self.data_version.next_version(self._clock.now_ms())
        self.request_persist()

    def replace_from_master(
        self, table: dict[str, SubscriptionGroupConfig], version: DataVersion
    ) -> bool:
        """A slave's sync: take the master's groups and version when the version
        differs; whether anything changed."""
        if version == self.data_version:
            return False
        self._table = dict(table)
        self.data_version = version
        return True

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config; created with the defaults when missing and
        ``autoCreateSubscriptionGroup`` is on or the group is a ``CID_RMQ_SYS_`` one."""
        config = self._table.get(group)
        if config is not None:
            return config
        if not (self._cfg.auto_create_subscription_group or is_sys_consumer_group(group)):
            return None
        config = SubscriptionGroupConfig(group)
        self._table[group] = config
        log.info("auto-created subscription group %s", config)
        self._changed()
        return config

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        """Create or replace a group (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)."""
        old = self._table.get(config.group_name)
        self._table[config.group_name] = config
        log.info(
            "subscription group %s old=%s new=%s", "updated" if old else "created", old, config
        )
        self._changed()

    def disable_consume(self, group: str) -> None:
        """Turn ``consumeEnable`` off (a group reading too slowly).

        Java bumps the version but does not persist here; the next change does.
        """
        old = self._table.get(group)
        if old is not None:
            self._table[group] = dataclasses.replace(old, consume_enable=False)
            self.data_version = self.data_version.next_version(self._clock.now_ms())

    def delete_subscription_group_config(self, group: str) -> bool:
        """Remove a group (DELETE_SUBSCRIPTIONGROUP); False when it did not exist.

        The caller also drops the group's offsets when asked (``removeOffset``).
        """
        old = self._table.pop(group, None)
        if old is None:
            log.warning("delete subscription group: %s not found", group)
            return False
        log.info("deleted subscription group %s", old)
        self._changed()
        return True
