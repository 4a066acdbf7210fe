# The compiled twin of common.pulled_message.py_pulled_messages (_record_kernels.pyx).
from collections.abc import Callable
from typing import Any

def pulled_messages(
    body: Any,
    cls: type[Any],
    offsets: tuple[tuple[str, str], ...],
    unread_slots: tuple[Any, ...],
    decompress: Callable[[bytes, int], bytes],
) -> list[Any] | None: ...
def encode_batch_records(
    body: Any,
    batch_raw: bytes,
    topic_raw: bytes,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_raw: bytes,
    born_port: int,
    store_raw: bytes,
    store_port: int,
    reconsume_times: int,
    max_messages: int,
) -> bytearray | None: ...
def frame_records(records: Any, min_size: int) -> list[int] | None: ...
def patch_records(
    records: Any, sizes: list[int], base: int, first_queue_offset: int, store_timestamp: int
) -> list[int]: ...
def dispatch_requests(
    view: Any,
    pos: int,
    max_count: int,
    cls: type[Any],
    select_properties: Callable[[str, tuple[str, ...]], tuple[str | None, ...]],
    names: tuple[str, str, str],
    tags_code: Callable[[str | None], int],
    stop_topic: bytes,
) -> tuple[list[Any], list[int], int]: ...
def encode_one_record(
    body: Any,
    topic_raw: bytes,
    props_raw: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_raw: bytes,
    born_port: int,
    store_timestamp: int,
    store_raw: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body_crc: int,
) -> bytearray | None: ...
def encode_one_record_into(
    target: Any,
    pos: int,
    body: Any,
    topic_raw: bytes,
    props_raw: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_raw: bytes,
    born_port: int,
    store_timestamp: int,
    store_raw: bytes,
    store_port: int,
    reconsume_times: int,
) -> int: ...
def count_batch_entries(body: Any, stop_after: int) -> int: ...
def offset_msg_ids(prefix: str, offsets: list[int]) -> list[str]: ...
def body_crc32(data: Any) -> int: ...
def place_batch_records(
    buffer: Any,
    pos: int,
    room: int,
    body: Any,
    batch_raw: bytes,
    topic_raw: bytes,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    born_raw: bytes,
    born_port: int,
    store_raw: bytes,
    store_port: int,
    reconsume_times: int,
    max_messages: int,
    base: int,
    first_queue_offset: int,
    store_timestamp: int,
) -> tuple[int, list[int]] | int | None: ...
