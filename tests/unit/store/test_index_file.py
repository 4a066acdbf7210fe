"""IndexFile: header bookkeeping, slot chains, timeDiff rules, capacity and queries."""

from __future__ import annotations

import itertools
import struct
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiorocketmq.common.tag_hash import index_key_hash, index_key_hashes
from aiorocketmq.store.errors import StoreIOError, StoreLoadError
from aiorocketmq.store.index_file import (
    IndexFile,
    index_file_name,
    index_file_size,
)
from tests.support.kernels import IMPLEMENTATIONS, use_index_kernel

SLOTS, ITEMS = 8, 10
HEADER = struct.Struct(">qqqqii")
ITEM = struct.Struct(">iqii")
T0 = 1_700_000_000_000


def new_index(tmp_path: Path, name: str = "20240101000000000", **kwargs: int) -> IndexFile:
    return IndexFile.create_blocking(tmp_path / name, SLOTS, ITEMS, **kwargs)


def item(raw: bytes, n: int) -> tuple[int, int, int, int]:
    return ITEM.unpack_from(raw, 40 + SLOTS * 4 + n * 20)  # type: ignore[return-value]


def test_size_and_name() -> None:
    assert index_file_size(5_000_000, 20_000_000) == 420_000_040
    assert index_file_size(SLOTS, ITEMS) == 40 + 32 + 200
    ms = 1_700_000_123_045
    expected = time.strftime("%Y%m%d%H%M%S", time.localtime(ms // 1000)) + "045"
    assert index_file_name(ms) == expected and len(expected) == 17


def test_fresh_file_reads_index_count_one_but_stores_zero(tmp_path: Path) -> None:
    index = new_index(tmp_path)
    assert index.index_count == 1 and index.hash_slot_count == 0
    assert HEADER.unpack_from(index.mapped.path.read_bytes()) == (0, 0, 0, 0, 0, 0)
    assert index.select_phy_offsets("T#k", 10, 0, 2**62) == []
    index.mapped.shutdown()


def test_put_writes_item_slot_and_header(tmp_path: Path) -> None:
    index = new_index(tmp_path)
    assert index.put_key("T#a", 100, T0)
    assert index.put_key("T#b", 200, T0 + 2500)
    raw = index.mapped.path.read_bytes()
    assert HEADER.unpack_from(raw) == (T0, T0 + 2500, 100, 200, 2, 3)
    hash_a = index_key_hash("T#a")
    assert item(raw, 1) == (hash_a, 100, 0, 0), "the first item's timeDiff: begin was 0"
    assert item(raw, 2)[1:] == (200, 2, 0), "2.5 s -> 2 (whole seconds)"
    assert struct.unpack_from(">i", raw, 40 + (hash_a % SLOTS) * 4)[0] == 1
    assert index.select_phy_offsets("T#a", 5, T0, T0) == [100]
    index.mapped.shutdown()


def test_chains_link_newest_first_and_collisions_are_filtered_by_hash(tmp_path: Path) -> None:
    index = new_index(tmp_path)
    # Find two keys with different hashes in the same slot.
    base = "T#k0"
    other = next(
        f"T#k{n}"
        for n in range(1, 500)
        if index_key_hash(f"T#k{n}") % SLOTS == index_key_hash(base) % SLOTS
        and index_key_hash(f"T#k{n}") != index_key_hash(base)
    )
    for n, key in enumerate([base, other, base, base]):
        index.put_key(key, 1000 + n, T0 + n * 1000)
    raw = index.mapped.path.read_bytes()
    assert [item(raw, n)[3] for n in range(1, 5)] == [0, 1, 2, 3], "each points at the previous"
    assert index.hash_slot_count == 1
    assert index.select_phy_offsets(base, 10, 0, 2**62) == [1003, 1002, 1000]
    assert index.select_phy_offsets(other, 10, 0, 2**62) == [1001]
    assert index.select_phy_offsets(base, 2, 0, 2**62) == [1003, 1002], "max_num"
    assert index.select_phy_offsets(base, 10, T0 + 2000, T0 + 2000) == [1002], "time window"
    index.mapped.shutdown()


def test_capacity_is_items_minus_one(tmp_path: Path) -> None:
    index = new_index(tmp_path)
    for n in range(ITEMS - 1):
        assert index.put_key(f"T#{n}", n, T0)
    assert index.is_write_full and not index.put_key("T#x", 99, T0)
    assert index.index_count == ITEMS
    index.mapped.shutdown()


def test_continuation_header_and_time_diff_rules(tmp_path: Path) -> None:
    index = new_index(tmp_path, end_phy_offset=5000, end_timestamp=T0)
    assert (index.begin_phy_offset, index.end_phy_offset) == (5000, 5000)
    assert (index.begin_timestamp, index.end_timestamp) == (T0, T0)
    index.put_key("T#a", 6000, T0 + 3999)
    raw = index.mapped.path.read_bytes()
    assert item(raw, 1)[2] == 3, "computed against the previous file's end time"
    assert (index.begin_timestamp, index.begin_phy_offset) == (T0 + 3999, 6000), "then replaced"
    index.put_key("T#b", 7000, T0)  # earlier than begin now: negative -> 0
    assert item(index.mapped.path.read_bytes(), 2)[2] == 0
    index.mapped.shutdown()


def test_time_matching() -> None:
    class Fake:
        begin_timestamp, end_timestamp = 100, 200

    matched = IndexFile.is_time_matched
    assert matched(Fake, 50, 250)  # type: ignore[arg-type]
    assert matched(Fake, 150, 999)  # type: ignore[arg-type]
    assert matched(Fake, 0, 100)  # type: ignore[arg-type]
    assert not matched(Fake, 201, 300)  # type: ignore[arg-type]
    assert not matched(Fake, 0, 99)  # type: ignore[arg-type]


def test_open_checks_size_and_reads_header(tmp_path: Path) -> None:
    index = new_index(tmp_path)
    index.put_key("T#a", 100, T0)
    index.flush_blocking()
    index.mapped.shutdown()
    again = IndexFile.open_blocking(tmp_path / "20240101000000000", SLOTS, ITEMS)
    assert (again.index_count, again.end_phy_offset) == (2, 100)
    assert again.select_phy_offsets("T#a", 3, 0, 2**62) == [100]
    again.mapped.shutdown()
    with pytest.raises(StoreLoadError, match="make"):
        IndexFile.open_blocking(tmp_path / "20240101000000000", SLOTS + 1, ITEMS)
    (tmp_path / "notes").write_bytes(b"")
    with pytest.raises(StoreLoadError):
        IndexFile.open_blocking(tmp_path / "notes", SLOTS, ITEMS)


# -- the shadow: header and slots in an anonymous copy until a flush ---------------------

WIDE = 4096  # slots: a 16 KiB table, five 4 KiB pages


def _wide_pair(folder: Path, items: int) -> tuple[IndexFile, IndexFile]:
    plain = IndexFile.create_blocking(folder / "1", WIDE, items, 4096, T0)
    shadowed = IndexFile.create_blocking(folder / "2", WIDE, items, 4096, T0, shadow=True)
    return plain, shadowed


def _put_both(pair: tuple[IndexFile, IndexFile], keys: list[str], start: int) -> None:
    """The keys one by one, as a batch and as a list, into both files alike."""
    phys = [4096 + 100 * (start + n) for n in range(len(keys))]
    times = [T0 + 1000 * (start + n) for n in range(len(keys))]
    for index in pair:
        third = len(keys) // 3
        for key, phy, ts in zip(keys[:third], phys, times, strict=False):
            assert index.put_key(key, phy, ts)
        index.put_hashes(
            index_key_hashes(keys[third : 2 * third]),
            np.array(phys[third : 2 * third], dtype=np.int64),
            np.array(times[third : 2 * third], dtype=np.int64),
        )
        rest = slice(2 * third, None)
        hashes = [index_key_hash(k) for k in keys[rest]]
        if index.put_hash_list(hashes, phys[rest], times[rest]) is None:
            for key, phy, ts in zip(keys[rest], phys[rest], times[rest], strict=True):
                assert index.put_key(key, phy, ts)


def _keys_on_page(page: int, n: int) -> list[str]:
    """``n`` keys whose slots lie in 4 KiB page ``page`` of a ``WIDE`` file."""
    found = (f"T#key-{i}" for i in itertools.count())
    on_page = (k for k in found if (40 + index_key_hash(k) % WIDE * 4) >> 12 == page)
    return list(itertools.islice(on_page, n))


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_a_shadowed_file_reaches_the_file_at_its_flush_byte_for_byte(
    tmp_path: Path, implementation: str
) -> None:
    """Puts during a flush leave the file with the header as taken and slots that may be
    newer; opened then (a process killed before the next flush), the slots are walked
    back to what the header counts: the file as it was at the take."""
    with pytest.MonkeyPatch.context() as patch:
        use_index_kernel(implementation, patch)
        pair = plain, shadowed = _wide_pair(tmp_path, 64)
        assert shadowed.is_shadowed and not plain.is_shadowed
        first = _keys_on_page(1, 9) + _keys_on_page(2, 6)
        later = [first[0], first[4], *_keys_on_page(3, 4)]  # chains on page 1 grow
        _put_both(pair, first, 0)
        # Queries read the shadow at once; the file keeps the header it was created with.
        assert shadowed.select_phy_offsets(first[3], 5, 0, 2**62) == [4396]
        assert HEADER.unpack_from(shadowed.mapped.path.read_bytes()) == (T0, T0, 4096, 4096, 0, 0)
        assert not any(shadowed.mapped.path.read_bytes()[40 : 40 + WIDE * 4])
        at_take = bytes(plain.mapped.buffer)
        marks = shadowed.take_marks()
        assert marks is not None and not marks[1]
        assert list(marks[0]) == [1, 1, 1, 0, 0], "the header's page and the two used"
        _put_both(pair, later, len(first))  # during the flush: page 1 again, page 3 new
        shadowed.flush_blocking(marks)
        on_disk = shadowed.mapped.path.read_bytes()
        table_end = 40 + WIDE * 4
        assert on_disk[:40] == at_take[:40], "the header as taken"
        assert on_disk[1 << 12 : 2 << 12] != at_take[1 << 12 : 2 << 12], "page 1 as it is now"
        assert not any(on_disk[3 << 12 : 4 << 12]), "page 3 was not marked at the take"
        killed = IndexFile.open_blocking(shadowed.mapped.path, WIDE, 64)
        killed.shadow_blocking()
        killed.flush_blocking()
        assert killed.mapped.path.read_bytes()[:table_end] == at_take[:table_end]
        killed.mapped.shutdown()
        shadowed.flush_blocking()
        assert shadowed.mapped.path.read_bytes() == bytes(plain.mapped.buffer)
        for index in pair:
            index.mapped.shutdown()


def test_a_full_shadowed_file_drops_its_copy_at_the_flush_after(tmp_path: Path) -> None:
    pair = plain, shadowed = _wide_pair(tmp_path, 4)  # holds 3 items
    _put_both(pair, ["T#a", "T#b", "T#c"], 0)
    assert shadowed.is_write_full and not shadowed.put_key("T#d", 1, T0)
    marks = shadowed.take_marks()
    assert marks is not None and marks[1], "full when taken: nothing can follow"
    shadowed.flush_blocking(marks)
    assert not shadowed.is_shadowed and shadowed.take_marks() is None
    assert shadowed.mapped.path.read_bytes() == bytes(plain.mapped.buffer)
    assert shadowed.select_phy_offsets("T#b", 5, 0, 2**62) == [4196]
    again = IndexFile.open_blocking(shadowed.mapped.path, WIDE, 4)
    again.shadow_blocking()
    assert not again.is_shadowed, "a full file is read from its mapping"
    for index in (*pair, again):
        index.mapped.shutdown()


def test_an_opened_file_is_shadowed_from_what_is_on_disk(tmp_path: Path) -> None:
    pair = plain, shadowed = _wide_pair(tmp_path, 64)
    _put_both(pair, [f"T#k{n}" for n in range(9)], 0)
    shadowed.flush_blocking()
    again = IndexFile.open_blocking(shadowed.mapped.path, WIDE, 64)
    again.shadow_blocking()
    assert again.is_shadowed and again.select_phy_offsets("T#k7", 5, 0, 2**62) == [4796]
    assert again.put_key("T#k9", 5000, T0 + 9000) and plain.put_key("T#k9", 5000, T0 + 9000)
    again.flush_blocking()
    assert again.mapped.path.read_bytes() == bytes(plain.mapped.buffer)
    for index in (*pair, again):
        index.mapped.shutdown()


def test_a_shadowed_file_deleted_while_held_flushes_without_error(tmp_path: Path) -> None:
    """Expiry unlinks a file a flush may still hold: its slots have nowhere to go."""
    shadowed = IndexFile.create_blocking(tmp_path / "1", WIDE, 64, shadow=True)
    assert shadowed.put_key("T#a", 100, T0)
    shadowed.mapped.path.unlink()
    shadowed.flush_blocking()
    assert shadowed.select_phy_offsets("T#a", 5, 0, 2**62) == [100]
    shadowed.mapped.shutdown()


def test_a_failed_shadow_write_leaves_its_pages_to_the_next_flush(tmp_path: Path) -> None:
    pair = plain, shadowed = _wide_pair(tmp_path, 64)
    _put_both(pair, _keys_on_page(1, 3), 0)
    marks = shadowed.take_marks()
    assert marks is not None and list(marks[0]) == [1, 1, 0, 0, 0]
    _put_both(pair, _keys_on_page(3, 2), 3)  # after the take: the next flush's
    path = shadowed.mapped.path
    path.rename(tmp_path / "moved")
    path.mkdir()  # opening it to write fails (EISDIR)
    with pytest.raises(StoreIOError, match="slot table not written"):
        shadowed.write_shadow_blocking(marks)
    path.rmdir()
    (tmp_path / "moved").rename(path)
    again = shadowed.take_marks()
    assert again is not None and list(again[0]) == [1, 1, 0, 1, 0], "taken again, and page 3"
    shadowed.flush_blocking(again)
    assert path.read_bytes() == bytes(plain.mapped.buffer)
    for index in pair:
        index.mapped.shutdown()


# -- batch put: byte for byte what put_key one by one writes ---------------------------

_keys = st.lists(
    st.tuples(
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x30FF), max_size=12),
        st.integers(0, 5_000),  # offset step
        st.integers(-3_000, 9_000),  # store time step (ms), clocks may go back
    ),
    max_size=40,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    keys=_keys,
    end_phy=st.sampled_from([0, 4096]),
    end_time=st.sampled_from([0, T0]),
    garbage=st.lists(st.integers(-5, 30), min_size=SLOTS, max_size=SLOTS),
    split=st.integers(0, 40),
)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_put_hashes_writes_what_put_key_writes(
    tmp_path_factory: pytest.TempPathFactory,
    implementation: str,
    keys: list[tuple[str, int, int]],
    end_phy: int,
    end_time: int,
    garbage: list[int],
    split: int,
) -> None:
    """Random keys (collisions, non-ASCII, a full file, slot heads pointing anywhere),
    by the C kernel and by numpy."""
    with pytest.MonkeyPatch.context() as patch:
        use_index_kernel(implementation, patch)
        _put_hashes_equals_put_key(tmp_path_factory, keys, end_phy, end_time, garbage, split)


def _put_hashes_equals_put_key(
    tmp_path_factory: pytest.TempPathFactory,
    keys: list[tuple[str, int, int]],
    end_phy: int,
    end_time: int,
    garbage: list[int],
    split: int,
) -> None:
    folder = tmp_path_factory.mktemp("idx")
    one = new_index(folder, "1", end_phy_offset=end_phy, end_timestamp=end_time)
    many = new_index(folder, "2", end_phy_offset=end_phy, end_timestamp=end_time)
    for index in (one, many):  # a slot table as a recovered file may hold it
        struct.pack_into(f">{SLOTS}i", index.mapped.buffer, 40, *garbage)
    full = [f"T#{k}" for k, _, _ in keys]
    offsets = list(itertools.accumulate((step for _, step, _ in keys), initial=end_phy))[1:]
    times = list(itertools.accumulate((step for _, _, step in keys), initial=T0))[1:]
    put_one = sum(one.put_key(k, o, t) for k, o, t in zip(full, offsets, times, strict=True))
    put_many = 0
    for part in (slice(0, split), slice(split, None)):  # two runs: chains cross batches
        put_many += many.put_hashes(
            index_key_hashes(full[part]),
            np.array(offsets[part], dtype=np.int64),
            np.array(times[part], dtype=np.int64),
        )
    assert put_many == put_one == min(len(keys), ITEMS - 1)
    assert bytes(many.mapped.buffer) == bytes(one.mapped.buffer)
    lists = new_index(folder, "3", end_phy_offset=end_phy, end_timestamp=end_time)
    struct.pack_into(f">{SLOTS}i", lists.mapped.buffer, 40, *garbage)
    put_lists = 0
    for start in range(0, len(full), 16):  # a single send's few keys, as lists
        part = slice(start, start + 16)
        done = lists.put_hash_list(
            [index_key_hash(k) for k in full[part]], offsets[part], times[part]
        )
        if done is None:  # no kernel: the scalar path is put_key itself
            break
        put_lists += done
    else:
        assert put_lists == put_one and bytes(lists.mapped.buffer) == bytes(one.mapped.buffer)
        assert (lists.index_count, lists.end_timestamp) == (one.index_count, one.end_timestamp)
    lists.mapped.shutdown()
    for attr in ("index_count", "hash_slot_count", "begin_timestamp", "end_timestamp"):
        assert getattr(many, attr) == getattr(one, attr), attr
    assert (many.begin_phy_offset, many.end_phy_offset) == (
        one.begin_phy_offset,
        one.end_phy_offset,
    )
    one.mapped.shutdown()
    many.mapped.shutdown()
