"""Offset message ids, UNIQ_KEY generation and client ids."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.msg_id import (
    UniqKeyGenerator,
    build_client_id,
    create_offset_msg_id,
    decode_offset_msg_id,
    offset_msg_ids,
    pack_ip,
    py_offset_msg_ids,
    unpack_ip,
)
from tests.support.kernels import kernel_or_skip


class SettableClock:
    """A wall clock a test may move backwards (ManualClock never goes back)."""

    def __init__(self, now_ms: int) -> None:
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> int:
        return 0


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


# --------------------------------------------------------------------------- offsetMsgId


def test_offset_msg_id_known_values() -> None:
    assert create_offset_msg_id("127.0.0.1", 20911, 0) == "7F000001000051AF0000000000000000"
    # The spec's example: 127.0.0.1:20911 at offset 0x308.
    assert create_offset_msg_id("127.0.0.1", 20911, 0x308) == "7F000001000051AF0000000000000308"
    assert decode_offset_msg_id("7F000001000051AF0000000000000308") == ("127.0.0.1", 20911, 0x308)
    assert decode_offset_msg_id("7f000001000051af0000000000000308") == ("127.0.0.1", 20911, 0x308)


def test_offset_msg_id_ipv6_is_56_chars() -> None:
    msg_id = create_offset_msg_id("2001:db8::1", 10911, 2**40)
    assert len(msg_id) == 56
    assert msg_id.startswith("20010DB8" + "0" * 22 + "01")
    assert decode_offset_msg_id(msg_id) == ("2001:db8::1", 10911, 2**40)


@given(
    st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str),
    st.integers(0, 0xFFFF),
    st.integers(0, 2**63 - 1),
)
def test_offset_msg_id_round_trip(ip: str, port: int, offset: int) -> None:
    msg_id = create_offset_msg_id(ip, port, offset)
    assert msg_id == msg_id.upper()
    assert len(msg_id) == (32 if "." in ip and ":" not in ip else 56)
    assert decode_offset_msg_id(msg_id) == (ip, port, offset)


@pytest.mark.parametrize(
    "msg_id",
    [
        "",
        "7F000001000051AF000000000000030",  # 31 chars
        "7F000001000051AF00000000000003080",  # 33 chars
        "7F000001000051AF000000000000030G",  # not hex
        "7F000001000051AF 000000000000308",  # whitespace
        "7F000001FFFFFFFF0000000000000308",  # port -1
        "7F000001000051AF8000000000000000",  # negative offset
    ],
)
def test_decode_rejects_bad_ids(msg_id: str) -> None:
    with pytest.raises(RemoteProtocolError):
        decode_offset_msg_id(msg_id)


@pytest.mark.parametrize(
    ("ip", "port", "offset"),
    [("localhost", 1, 0), ("127.0.0.1", 65536, 0), ("127.0.0.1", -1, 0), ("127.0.0.1", 1, -1)],
)
def test_create_rejects_bad_values(ip: str, port: int, offset: int) -> None:
    with pytest.raises(LocalProtocolError):
        create_offset_msg_id(ip, port, offset)


def test_ip_packing() -> None:
    assert pack_ip("10.1.2.3") == bytes([10, 1, 2, 3])
    assert len(pack_ip("::1")) == 16
    assert unpack_ip(bytes([10, 1, 2, 3])) == "10.1.2.3"
    mapped = pack_ip("::ffff:1.2.3.4")  # stays a 16-byte address
    assert len(mapped) == 16
    assert pack_ip(unpack_ip(mapped)) == mapped
    assert unpack_ip(pack_ip("2001:0db8:0::1")) == "2001:db8::1"
    with pytest.raises(LocalProtocolError):
        pack_ip("1.2.3")
    with pytest.raises(RemoteProtocolError):
        unpack_ip(b"\0" * 5)


# --------------------------------------------------------------------------- UNIQ_KEY


def _fields(key: str) -> tuple[bytes, int, int, int, int]:
    raw = bytes.fromhex(key)
    ip_len = len(raw) - 12
    pid, loader, diff, counter = struct.unpack(">HIIH", raw[ip_len:])
    return raw[:ip_len], pid, loader, diff, counter


def test_uniq_key_layout() -> None:
    month_start = datetime(2026, 3, 1, tzinfo=UTC)
    clock = ManualClock(wall_ms=_ms(month_start) + 12_345)
    gen = UniqKeyGenerator("10.0.0.5", 0x12345, clock=clock, loader_hash=0xCAFEBABE, tz=UTC)
    first = gen.next_id()
    assert len(first) == 32
    assert first == first.upper()
    assert first.startswith("0A000005" + "2345" + "CAFEBABE")  # pid keeps its low 16 bits
    assert gen.prefix == "0A0000052345CAFEBABE"
    assert _fields(first) == (bytes([10, 0, 0, 5]), 0x2345, 0xCAFEBABE, 12_345, 0)
    clock.advance(1000)
    assert _fields(gen.next_id())[3:] == (13_345, 1)


def test_uniq_keys_are_distinct_and_counter_wraps_at_16_bits() -> None:
    clock = ManualClock(wall_ms=_ms(datetime(2026, 3, 2, tzinfo=UTC)))
    gen = UniqKeyGenerator("10.0.0.5", 1, clock=clock, loader_hash=7, tz=UTC)
    keys = [gen.next_id() for _ in range(0x10001)]
    assert len(set(keys[:0x10000])) == 0x10000
    assert _fields(keys[0x10000])[4] == 0  # AtomicInteger keeps counting; the id keeps 16 bits
    assert keys[0x10000] == keys[0]  # same ms: Java has the same collision after 65536 ids


def test_uniq_key_month_rollover() -> None:
    jan_end = datetime(2026, 2, 1, tzinfo=UTC) - timedelta(milliseconds=1)
    clock = ManualClock(wall_ms=_ms(jan_end))
    gen = UniqKeyGenerator("10.0.0.5", 1, clock=clock, loader_hash=7, tz=UTC)
    # 31 days minus 1 ms exceeds an int: Java writes the wrapped 32 bits.
    assert _fields(gen.next_id())[3] == (31 * 86_400_000 - 1) & 0xFFFFFFFF
    clock.advance(1)
    assert _fields(gen.next_id())[3] == 0
    clock.advance(5)
    assert _fields(gen.next_id())[3] == 5


def test_uniq_key_counts_months_in_the_given_zone() -> None:
    plus8 = timezone(timedelta(hours=8))
    # 2026-03-01 00:00:10 in UTC+8 is still February in UTC.
    now = datetime(2026, 3, 1, 0, 0, 10, tzinfo=plus8)
    gen = UniqKeyGenerator("10.0.0.5", 1, clock=ManualClock(wall_ms=_ms(now)), tz=plus8)
    assert _fields(gen.next_id())[3] == 10_000


def test_uniq_key_small_clock_step_back_writes_zero() -> None:
    start = _ms(datetime(2026, 3, 1, tzinfo=UTC))
    clock = SettableClock(start + 5_000)
    gen = UniqKeyGenerator("10.0.0.5", 1, clock=clock, loader_hash=7, tz=UTC)
    clock.now = start - 500  # NTP moved us back into February
    assert _fields(gen.next_id())[3] == 0
    clock.now = start - 2_000_000  # a bigger step is written wrapped, as Java does
    assert _fields(gen.next_id())[3] == (-2_000_000) & 0xFFFFFFFF


def test_uniq_key_ipv6_and_default_loader_hash() -> None:
    clock = ManualClock(wall_ms=_ms(datetime(2026, 3, 2, tzinfo=UTC)))
    gen_a = UniqKeyGenerator("2001:db8::5", 1, clock=clock, tz=UTC)
    gen_b = UniqKeyGenerator(pack_ip("2001:db8::5"), 1, clock=clock, tz=UTC)
    key = gen_a.next_id()
    assert len(key) == 56
    assert _fields(key)[0] == pack_ip("2001:db8::5")
    # Two generators in one process differ by their stand-in for the classloader hash.
    assert gen_a.prefix != gen_b.prefix
    with pytest.raises(LocalProtocolError):
        UniqKeyGenerator(b"\x01\x02", 1, clock=clock)


def test_uniq_key_with_system_clock_and_local_time() -> None:
    gen = UniqKeyGenerator("127.0.0.1", 4242)
    keys = {gen.next_id() for _ in range(100)}
    assert len(keys) == 100
    assert all(len(k) == 32 and k.startswith("7F0000011092") for k in keys)
    # Within a month of its start: at most 31 days of ms.
    assert all(_fields(k)[3] <= 31 * 86_400_000 for k in keys)


# --------------------------------------------------------------------------- client id


def test_client_id() -> None:
    assert build_client_id("10.0.0.1", "DEFAULT", 123, nano_time=456) == "10.0.0.1@123#456"
    assert build_client_id("10.0.0.1", "DEFAULT", 123) == "10.0.0.1@123"
    assert build_client_id("10.0.0.1", "myInstance", 123) == "10.0.0.1@myInstance"
    assert build_client_id("10.0.0.1", "i", 1, unit_name="unitA") == "10.0.0.1@i@unitA"
    assert build_client_id("10.0.0.1", "i", 1, unit_name="  ") == "10.0.0.1@i"


@given(
    host=st.sampled_from([("127.0.0.1", 10911), ("::1", 0), ("10.0.0.7", 65535)]),
    offsets=st.lists(st.integers(0, 2**63 - 1), max_size=20),
)
def test_a_batch_s_offset_ids_are_each_offset_s_id(
    host: tuple[str, int], offsets: list[int]
) -> None:
    prefix = create_offset_msg_id(*host, 0)[:-16]
    expected = [create_offset_msg_id(*host, offset) for offset in offsets]
    assert offset_msg_ids(prefix, offsets) == py_offset_msg_ids(prefix, offsets) == expected
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    assert kernel.offset_msg_ids(prefix, offsets) == expected


@pytest.mark.parametrize("offsets", [[-1], [2**63], [1, 2**64]])
def test_offsets_outside_int64_are_written_as_the_reference_writes_them(offsets: list[int]) -> None:
    assert offset_msg_ids("7F000001", offsets) == py_offset_msg_ids("7F000001", offsets)
