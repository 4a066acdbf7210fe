# The compiled twin of store.index_file.IndexFile.put_hashes (_index_kernels.pyx).
from typing import Any

def put_hashes(
    buf: Any,
    head: Any,
    dirty: bytearray | None,
    items_base: int,
    slot_num: int,
    index_num: int,
    count: int,
    slot_count: int,
    begin_ts: int,
    begin_phy: int,
    hashes: Any,
    phys: Any,
    tss: Any,
) -> tuple[int, int, int, int, int]: ...
def put_hash_list(
    buf: Any,
    head: Any,
    dirty: bytearray | None,
    items_base: int,
    slot_num: int,
    index_num: int,
    count: int,
    slot_count: int,
    begin_ts: int,
    begin_phy: int,
    hashes: list[int],
    phys: list[int],
    tss: list[int],
) -> tuple[int, int, int, int, int]: ...
