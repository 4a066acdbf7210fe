"""MessageStoreConfig: every store setting under RocketMQ 4.9.8's name and default.

Owns: ``MessageStoreConfig`` (a frozen pydantic model), the ``BrokerRole`` and
``FlushDiskType`` enums, and the store's path layout (``StorePathConfigHelper``:
``commitlog/``, ``consumequeue/``, ``index/``, ``checkpoint``, ``abort``, ``lock``,
``config/``).

Must not: read the environment or the file system (the CLI loads ``.properties``
text with ``common.java_properties`` and passes the mapping in), or hold state.

Names. Each field is the snake_case of the Java field of
``store/.../config/MessageStoreConfig.java`` (4.9.8) and carries the Java name as
its alias, so ``MessageStoreConfig.model_validate(load_properties("broker.conf"))``
reads a stock file; ``populate_by_name`` lets code use the snake_case names. Fields
RocketMQ marks ``@ImportantField`` have ``json_schema_extra={"important": True}``
(``mqbroker -m`` prints only those). Settings that are not RocketMQ's say
"aiorocketmq:" in their description.

Values RocketMQ normalises in a getter are normalised once, on validation:
``mappedFileSizeConsumeQueue`` is rounded *up* to a multiple of 20 (one unit) and
``diskMaxUsedSpaceRatio`` is clamped to 10..95. ``storePathRootDir`` defaults to
``~/store`` and is expanded when a path is built, so no default reads ``$HOME``.

Small files work: tests use e.g. 64 KiB CommitLog files and a few ConsumeQueue
units per file. Keys that belong to ``BrokerConfig`` (listenPort, brokerName,
longPollingEnable...) are not here, even where specs/store.md §14 lists them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel
from pydantic.config import JsonDict

from aiorocketmq.common.constants import CQ_STORE_UNIT_SIZE, DEFAULT_MESSAGE_DELAY_LEVEL
from aiorocketmq.common.settings import model_keys

__all__ = ["BrokerRole", "FlushDiskType", "MessageStoreConfig"]

_IMPORTANT: Final[JsonDict] = {"important": True}
_KIB: Final = 1024
_MIB: Final = 1024 * 1024


class BrokerRole(enum.StrEnum):
    """``brokerRole``: a master acknowledges puts; a slave only replicates."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class FlushDiskType(enum.StrEnum):
    """``flushDiskType``: whether a put waits for its bytes to reach the disk."""

    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def _ms(default: int, what: str, *, important: bool = False) -> Any:
    """A millisecond setting (documents the unit once, here)."""
    extra = _IMPORTANT if important else None
    return Field(default, ge=0, description=f"{what} (ms).", json_schema_extra=extra)


class MessageStoreConfig(BaseModel):
    """Settings of the message store (``MessageStoreConfig`` in RocketMQ 4.9.8).

    Build one with ``MessageStoreConfig(store_path_root_dir=str(tmp_path),
    mapped_file_size_commit_log=64 * 1024)`` or from a ``.properties`` mapping
    with ``from_properties``. The model is frozen; derive variants with
    ``model_copy(update=...)``.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    # -- paths -------------------------------------------------------------------------
    store_path_root_dir: str = Field(
        "~/store", description="Store root directory.", json_schema_extra=_IMPORTANT
    )
    store_path_commit_log: str | None = Field(
        None,
        description="CommitLog directory; default <root>/commitlog. RocketMQ's ','-separated "
        "multi-path form is refused (aiorocketmq has no MultiPathMappedFileQueue).",
        json_schema_extra=_IMPORTANT,
    )
    store_path_d_ledger_commit_log: str | None = Field(
        None, alias="storePathDLedgerCommitLog", description="DLedger only; unused."
    )
    read_only_commit_log_store_paths: str | None = Field(None, description="Unused (4.9.x).")

    # -- file sizes ------------------------------------------------------------------
    mapped_file_size_commit_log: int = Field(
        1024 * _MIB, ge=_KIB, description="Bytes per CommitLog file (1 GiB)."
    )
    mapped_file_size_consume_queue: int = Field(
        300_000 * CQ_STORE_UNIT_SIZE,
        ge=1,
        description="Bytes per ConsumeQueue file (300,000 units of 20 bytes); rounded up "
        "to a multiple of 20.",
    )
    enable_consume_queue_ext: bool = Field(False, description="ConsumeQueueExt; unsupported.")
    mapped_file_size_consume_queue_ext: int = Field(48 * _MIB, description="Ext file bytes.")
    bit_map_length_consume_queue_ext: int = Field(64, description="Ext filter bitmap bits.")
    max_hash_slot_num: int = Field(5_000_000, ge=1, description="Hash slots per IndexFile.")
    max_index_num: int = Field(
        20_000_000, ge=2, description="Index items per IndexFile (item 0 is never used)."
    )
    max_message_size: int = Field(
        4 * _MIB, ge=1, description="Largest message body (bytes); a batch's whole body too."
    )

    # -- flush -------------------------------------------------------------------------
    flush_disk_type: FlushDiskType = Field(
        FlushDiskType.ASYNC_FLUSH,
        description="ASYNC_FLUSH or SYNC_FLUSH.",
        json_schema_extra=_IMPORTANT,
    )
    flush_interval_commit_log: int = _ms(500, "ASYNC_FLUSH interval", important=True)
    flush_commit_log_timed: bool = Field(
        True,
        description="Fixed-interval flush (true) or woken by puts.",
        json_schema_extra=_IMPORTANT,
    )
    flush_commit_log_least_pages: int = Field(
        4, ge=0, description="Dirty 4 KiB pages before an interval flush."
    )
    flush_commit_log_thorough_interval: int = _ms(10_000, "Full CommitLog flush interval")
    commit_interval_commit_log: int = _ms(200, "Transient pool commit interval", important=True)
    commit_commit_log_least_pages: int = Field(4, ge=0, description="Transient pool only.")
    commit_commit_log_thorough_interval: int = _ms(200, "Transient pool only")
    flush_interval_consume_queue: int = _ms(1000, "ConsumeQueue flush interval")
    flush_consume_queue_least_pages: int = Field(
        2, ge=0, description="Dirty 4 KiB pages before a ConsumeQueue interval flush."
    )
    flush_consume_queue_thorough_interval: int = _ms(60_000, "Full ConsumeQueue flush interval")
    checkpoint_flush_interval: int = Field(
        1_000,
        ge=0,
        description="aiorocketmq: a full ConsumeQueue flush and a checkpoint at least this "
        "often (ms), so a crash replays seconds of traffic rather than up to "
        "flushConsumeQueueThoroughInterval's minute; 0 leaves it to that interval.",
    )
    sync_flush_timeout: int = _ms(5000, "SYNC_FLUSH wait before FLUSH_DISK_TIMEOUT")
    transient_store_pool_enable: bool = Field(
        False, description="Off-heap write buffers; unsupported.", json_schema_extra=_IMPORTANT
    )
    transient_store_pool_size: int = Field(5, description="Transient pool buffers.")
    fast_fail_if_no_buffer_in_store_pool: bool = Field(False, description="Transient pool only.")
    warm_maped_file_enable: bool = Field(
        False,
        description="RocketMQ's warm-up of new CommitLog files: touch every page and, under "
        "SYNC_FLUSH, msync every flushLeastPagesWhenWarmMapedFile pages (no mlock here).",
    )
    flush_least_pages_when_warm_maped_file: int = Field(
        4096, ge=0, description="Pages between msyncs while warming (16 MiB)."
    )
    warm_commit_log_files: bool = Field(
        True,
        description="aiorocketmq: prefault the pages of a new CommitLog file ahead of the "
        "writer, in a thread, at most warmCommitLogAheadBytes ahead, so the event loop "
        "meets no first-touch page faults (on a VM whose fresh memory faults slowly they "
        "stalled the loop 10-50 ms at a time during a burst). The thread takes the faults "
        "the writer would have taken, no more; the file is in use meanwhile. Warmed pages "
        "the writer has not reached may go to disk once as zeros (the kernel's writeback "
        "of old dirty pages: at most about the window every 30 s). Needs Linux >= 5.14 "
        "(MADV_POPULATE_WRITE); elsewhere only whole-file warming runs.",
    )
    warm_commit_log_ahead_bytes: int = Field(
        32 * 1024 * 1024,
        ge=0,
        description="aiorocketmq: how far ahead of the writer warmCommitLogFiles goes "
        "(0: the whole file at once, in a thread that runs only when a core is free; "
        "that zeroes and dirties the whole file, as RocketMQ's warmMapedFileEnable does).",
    )
    preallocate_commit_log_blocks: bool = Field(
        True,
        description="aiorocketmq: posix_fallocate every new CommitLog, ConsumeQueue and index "
        "file in the allocator thread, so a full disk fails the file's creation (the put is "
        "refused) instead of a later write into the mapping (SIGBUS, the broker dies).",
    )
    verify_writes: bool = Field(
        False,
        description="aiorocketmq: re-decode every appended record (size, magic, body CRC) "
        "before it is copied into the file; tests turn it on.",
    )
    use_reentrant_lock_when_put_message: bool = Field(
        True, description="Java lock choice; the event loop is our only writer."
    )
    os_page_cache_busy_time_out_mills: int = _ms(
        1000, "Put-lock hold time before OS_PAGECACHE_BUSY"
    )
    debug_lock_enable: bool = Field(False, description="Java lock debugging; unused.")

    # -- roles, HA ---------------------------------------------------------------------
    broker_role: BrokerRole = Field(
        BrokerRole.ASYNC_MASTER,
        description="ASYNC_MASTER, SYNC_MASTER or SLAVE.",
        json_schema_extra=_IMPORTANT,
    )
    ha_listen_port: int = Field(10912, ge=0, le=65535, description="HA port (listenPort + 1).")
    ha_send_heartbeat_interval: int = _ms(5000, "Slave offset report interval")
    ha_housekeeping_interval: int = _ms(20_000, "HA connection idle timeout")
    ha_transfer_batch_size: int = Field(32 * _KIB, ge=1, description="HA transfer bytes per frame.")
    ha_master_address: str | None = Field(
        None, description="Static master HA address for a slave.", json_schema_extra=_IMPORTANT
    )
    ha_slave_fallbehind_max: int = Field(
        256 * _MIB, ge=0, description="Bytes a slave may lag before SLAVE_NOT_AVAILABLE."
    )
    slave_timeout: int = _ms(3000, "SYNC_MASTER wait before FLUSH_SLAVE_TIMEOUT")
    offset_check_in_slave: bool = Field(False, description="Let a slave correct pull offsets.")

    # -- cleanup -----------------------------------------------------------------------
    clean_resource_interval: int = _ms(10_000, "File expiry pass interval")
    delete_commit_log_files_interval: int = _ms(100, "Pause between CommitLog deletions")
    delete_consume_queue_files_interval: int = _ms(100, "Pause between ConsumeQueue deletions")
    destroy_maped_file_interval_forcibly: int = _ms(120_000, "Unmap a referenced file after")
    redelete_hanged_file_interval: int = _ms(120_000, "Retry a half-deleted file after")
    delete_when: str = Field(
        "04",
        description="';'-separated local hours when expiry runs.",
        json_schema_extra=_IMPORTANT,
    )
    file_reserved_time: int = Field(
        72, ge=0, description="Hours a CommitLog file is kept.", json_schema_extra=_IMPORTANT
    )
    disk_max_used_space_ratio: int = Field(
        75, description="Disk use (%) that triggers expiry; clamped to 10..95."
    )
    disk_space_warning_level_ratio: float = Field(
        0.90,
        gt=0,
        le=1,
        description="aiorocketmq (Java system property rocketmq.broker."
        "diskSpaceWarningLevelRatio): above it the disk is full and puts are refused.",
    )
    disk_space_clean_forcibly_ratio: float = Field(
        0.85,
        gt=0,
        le=1,
        description="aiorocketmq (Java system property rocketmq.broker."
        "diskSpaceCleanForciblyRatio): above it files are deleted before their time.",
    )
    clean_file_forcibly_enable: bool = Field(
        True, description="Allow early deletion under disk pressure.", json_schema_extra=_IMPORTANT
    )
    disk_fall_recorded: bool = Field(True, description="Record pulls that fell to disk.")

    # -- recovery, index ---------------------------------------------------------------
    check_crc_on_recover: bool = Field(
        True, alias="checkCRCOnRecover", description="Verify body CRCs during recovery."
    )
    message_index_enable: bool = Field(
        True, description="Build the IndexFile.", json_schema_extra=_IMPORTANT
    )
    message_index_safe: bool = Field(
        False, description="Recover from the index checkpoint too.", json_schema_extra=_IMPORTANT
    )
    max_msgs_num_batch: int = Field(64, ge=1, description="Cap on offsets per index query.")
    default_query_max_num: int = Field(32, ge=1, description="Unique-key query max results.")
    duplication_enable: bool = Field(False, description="Recover with duplicate detection.")
    put_msg_index_hight_water: int = Field(600_000, description="Unused flow-control mark.")

    # -- reads -------------------------------------------------------------------------
    max_transfer_bytes_on_message_in_memory: int = Field(
        256 * _KIB,
        ge=1,
        description="Pull reply bytes, data in memory.",
        json_schema_extra=_IMPORTANT,
    )
    max_transfer_count_on_message_in_memory: int = Field(
        32, ge=1, description="Pull reply messages, data in memory.", json_schema_extra=_IMPORTANT
    )
    max_transfer_bytes_on_message_in_disk: int = Field(
        64 * _KIB, ge=1, description="Pull reply bytes, data on disk.", json_schema_extra=_IMPORTANT
    )
    max_transfer_count_on_message_in_disk: int = Field(
        8, ge=1, description="Pull reply messages, data on disk.", json_schema_extra=_IMPORTANT
    )
    access_message_in_memory_max_ratio: int = Field(
        40,
        ge=0,
        le=100,
        description="Share of RAM (%) beyond which data counts as on disk.",
        json_schema_extra=_IMPORTANT,
    )

    # -- schedule ----------------------------------------------------------------------
    message_delay_level: str = Field(DEFAULT_MESSAGE_DELAY_LEVEL, description="Delay levels.")
    flush_delay_offset_interval: int = _ms(10_000, "delayOffset.json persist interval")
    enable_schedule_message_stats: bool = Field(True, description="Schedule statistics.")
    enable_schedule_async_deliver: bool = Field(False, description="Async delay delivery.")
    schedule_async_deliver_max_pending_limit: int = Field(2000, description="Async deliver cap.")
    timer_wheel_enable: bool = Field(
        True,
        description=(
            "aiorocketmq (RocketMQ 5's key): messages with a delivery time (TIMER_DELIVER_MS, "
            "TIMER_DELAY_SEC, TIMER_DELAY_MS) wait in the broker's durable timer; false "
            "refuses them."
        ),
    )
    timer_max_delay_sec: int = Field(
        3 * 24 * 3600,
        ge=1,
        description=(
            "aiorocketmq (RocketMQ 5's key): the furthest delivery time a remoting send may "
            "ask for (s)."
        ),
    )
    schedule_async_deliver_max_resend_num2_blocked: int = Field(3, description="Resends to block.")

    # -- DLedger and LMQ (accepted so a stock broker.conf loads; not implemented) --------
    enable_d_leger_commit_log: bool = Field(
        False, alias="enableDLegerCommitLog", description="DLedger; unsupported."
    )
    d_leger_group: str | None = Field(None, alias="dLegerGroup", description="DLedger.")
    d_leger_peers: str | None = Field(None, alias="dLegerPeers", description="DLedger.")
    d_leger_self_id: str | None = Field(None, alias="dLegerSelfId", description="DLedger.")
    preferred_leader_id: str | None = Field(None, description="DLedger.")
    is_enable_batch_push: bool = Field(False, alias="isEnableBatchPush", description="DLedger.")
    enable_lmq: bool = Field(False, description="Light message queues; unsupported.")
    enable_multi_dispatch: bool = Field(False, description="LMQ multi-dispatch; unsupported.")
    max_lmq_consume_queue_num: int = Field(20_000, description="LMQ queue cap.")

    # -- normalisation -----------------------------------------------------------------

    @field_validator("mapped_file_size_consume_queue")
    @classmethod
    def _round_to_units(cls, value: int) -> int:
        # getMappedFileSizeConsumeQueue: ceil(size / 20) * 20.
        return -(-value // CQ_STORE_UNIT_SIZE) * CQ_STORE_UNIT_SIZE

    @field_validator("disk_max_used_space_ratio")
    @classmethod
    def _clamp_ratio(cls, value: int) -> int:
        return min(max(value, 10), 95)

    @field_validator("store_path_commit_log")
    @classmethod
    def _single_path(cls, value: str | None) -> str | None:
        if value is not None and "," in value:
            raise ValueError("a ','-separated multi-path CommitLog is not supported")
        return value

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> MessageStoreConfig:
        """Build from ``.properties`` key/values (Java names); other keys are ignored.

        Raises:
            pydantic.ValidationError: a value does not parse; the error names the key.
        """
        return cls.model_validate(dict(properties))

    @classmethod
    def known_keys(cls) -> frozenset[str]:
        """Every accepted key: Java names and snake_case names.

        A CLI loading one file for several models warns about keys none of them know.
        """
        return model_keys(cls)

    # -- paths (StorePathConfigHelper) -----------------------------------------------------

    @property
    def root_dir(self) -> Path:
        """``storePathRootDir`` with ``~`` expanded."""
        return Path(self.store_path_root_dir).expanduser()

    @property
    def full_cq_flush_interval_ms(self) -> int:
        """How often the ConsumeQueues are fully flushed and the checkpoint written."""
        thorough = self.flush_consume_queue_thorough_interval
        ours = self.checkpoint_flush_interval
        return min(thorough, ours) if ours > 0 else thorough

    @property
    def commit_log_dir(self) -> Path:
        """``storePathCommitLog``, or ``<root>/commitlog``."""
        if self.store_path_commit_log is None:
            return self.root_dir / "commitlog"
        return Path(self.store_path_commit_log).expanduser()

    @property
    def consume_queue_dir(self) -> Path:
        """``<root>/consumequeue``: holds ``<topic>/<queueId>/<20-digit offset>``."""
        return self.root_dir / "consumequeue"

    @property
    def consume_queue_ext_dir(self) -> Path:
        """``<root>/consumequeue_ext`` (never written here)."""
        return self.root_dir / "consumequeue_ext"

    @property
    def index_dir(self) -> Path:
        """``<root>/index``: IndexFiles named ``yyyyMMddHHmmssSSS``."""
        return self.root_dir / "index"

    @property
    def checkpoint_path(self) -> Path:
        """``<root>/checkpoint`` (4096 bytes)."""
        return self.root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        """``<root>/abort``: present while running; left behind by a crash."""
        return self.root_dir / "abort"

    @property
    def lock_path(self) -> Path:
        """``<root>/lock``: exclusive lock on byte 0 while a broker runs."""
        return self.root_dir / "lock"

    @property
    def config_dir(self) -> Path:
        """``<root>/config``: topics.json, consumerOffset.json..."""
        return self.root_dir / "config"

    @property
    def delay_offset_path(self) -> Path:
        """``<root>/config/delayOffset.json``."""
        return self.config_dir / "delayOffset.json"
