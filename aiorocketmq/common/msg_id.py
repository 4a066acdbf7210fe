"""Message ids and client ids: offsetMsgId, UNIQ_KEY, and the client id string.

Owns:

* the offset message id (the broker's ``msgId``, ``MessageDecoder.createMessageId``)::

      IPv4: store ip (4) | store port (int32) | CommitLog physical offset (int64) = 16 bytes
      IPv6: store ip (16) | store port (int32) | physical offset (int64)           = 28 bytes

  rendered as upper-case hex (32 or 56 characters), big-endian;
* ``UniqKeyGenerator``: the client-made ``UNIQ_KEY`` in the layout of Java's
  ``MessageClientIDSetter`` (4.9.x)::

      client ip (4 or 16) | pid (uint16) | "classloader hash" (int32)
      | ms since the start of the current month (int32) | counter (uint16)

* ``build_client_id``: ``ClientConfig.buildMQClientId``;
* ``pack_ip`` / ``unpack_ip``: textual IP <-> the 4 or 16 address bytes records use.

Must not: do I/O or read the clock directly (the generator takes a ``Clock``), or keep
module-level mutable state (each generator owns its counter).
"""

from __future__ import annotations

import functools
import ipaddress
import struct
from datetime import datetime, tzinfo
from typing import Final

from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.kernels import load_kernel

_PORT_OFFSET: Final = struct.Struct(">iq")
_PORT_MAX: Final = 0xFFFF
_INT64_MAX: Final = (1 << 63) - 1


@functools.lru_cache(maxsize=4096)
def pack_ip(ip: str) -> bytes:
    """Return the 4 (IPv4) or 16 (IPv6) address bytes of a textual IP.

    Memoised: a broker packs the same few peer and store addresses for every
    message, and the result depends on the argument only.

    Raises:
        LocalProtocolError: ``ip`` is not an IPv4 or IPv6 literal.
    """
    try:
        return ipaddress.ip_address(ip).packed
    except ValueError as exc:
        raise LocalProtocolError(f"not an IP address: {ip!r}") from exc


@functools.lru_cache(maxsize=4096)
def unpack_ip(raw: bytes) -> str:
    """Render 4 or 16 address bytes as text (dotted quad, or IPv6 as ``ipaddress`` prints it).

    Memoised for the same reason as ``pack_ip``: decoding a pull body renders the
    same few addresses for every record.

    Raises:
        RemoteProtocolError: ``raw`` is neither 4 nor 16 bytes long.
    """
    if len(raw) == 4:
        return f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"
    if len(raw) == 16:
        return str(ipaddress.IPv6Address(raw))
    raise RemoteProtocolError(f"an IP address has 4 or 16 bytes, not {len(raw)}")


def offset_msg_ids(prefix: str, offsets: list[int]) -> list[str]:
    """The offset message ids of records stored at ``offsets`` by the host ``prefix``
    names (its ip and port in upper-case hex, as in ``create_offset_msg_id``): a
    batch's ids in one call, in C when built (``common/_record_kernels.pyx``)."""
    if _KERNEL is not None:
        try:
            return _KERNEL.offset_msg_ids(prefix, offsets)  # type: ignore[no-any-return]
        except (OverflowError, TypeError, UnicodeEncodeError):
            pass  # an offset or prefix the kernel does not write as the reference does
    return py_offset_msg_ids(prefix, offsets)


def py_offset_msg_ids(prefix: str, offsets: list[int]) -> list[str]:
    """``offset_msg_ids`` in Python: the reference."""
    return [f"{prefix}{offset:016X}" for offset in offsets]


def create_offset_msg_id(store_ip: str, store_port: int, physical_offset: int) -> str:
    """Build the offset message id of a stored message.

    Args:
        store_ip: the broker's address as written in the record (``brokerIP1``).
        store_port: the broker's listen port.
        physical_offset: the record's CommitLog offset.

    Returns:
        32 (IPv4) or 56 (IPv6) upper-case hex characters.

    Raises:
        LocalProtocolError: bad IP, port outside 0-65535, or offset outside 0..2**63-1.
    """
    if not 0 <= store_port <= _PORT_MAX:
        raise LocalProtocolError(f"port out of range: {store_port}")
    if not 0 <= physical_offset <= _INT64_MAX:
        raise LocalProtocolError(f"physical offset out of range: {physical_offset}")
    return (pack_ip(store_ip) + _PORT_OFFSET.pack(store_port, physical_offset)).hex().upper()


def offset_msg_id_from_raw(store_ip_raw: bytes, store_port: int, physical_offset: int) -> str:
    """Like ``create_offset_msg_id`` from already packed address bytes (decode path).

    Values come straight from a record and are rendered as stored (``port`` as int32,
    ``physical_offset`` as int64), as Java does.
    """
    return (store_ip_raw + _PORT_OFFSET.pack(store_port, physical_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Split an offset message id into store IP, port and physical offset.

    Args:
        msg_id: 32 or 56 hex characters, either case (``VIEW_MESSAGE_BY_ID`` input).

    Returns:
        ``(ip, port, physical_offset)``.

    Raises:
        RemoteProtocolError: wrong length, not hex, port outside 0-65535, or a
            negative offset.
    """
    if len(msg_id) not in (32, 56):
        raise RemoteProtocolError(f"an offset message id has 32 or 56 hex chars, not {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise RemoteProtocolError(f"offset message id is not hex: {msg_id!r}") from exc
    if len(raw) * 2 != len(msg_id):
        # fromhex skips whitespace; an id with spaces is not an id.
        raise RemoteProtocolError(f"offset message id is not hex: {msg_id!r}")
    ip_len = len(raw) - 12
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    if not 0 <= port <= _PORT_MAX:
        raise RemoteProtocolError(f"offset message id carries port {port}")
    if offset < 0:
        raise RemoteProtocolError(f"offset message id carries negative offset {offset}")
    return unpack_ip(raw[:ip_len]), port, offset


def _month_bounds_ms(now_ms: int, tz: tzinfo | None) -> tuple[int, int]:
    # Start of this month and of the next one, in ``tz`` (None: local time, which is
    # what Java's Calendar.getInstance() uses).
    start = datetime.fromtimestamp(now_ms / 1000, tz).replace(
        day=1, hour=0, minute=0, second=0, microsecond=0
    )
    if start.month == 12:
        nxt = start.replace(year=start.year + 1, month=1)
    else:
        nxt = start.replace(month=start.month + 1)
    return round(start.timestamp() * 1000), round(nxt.timestamp() * 1000)


class UniqKeyGenerator:
    """Makes ``UNIQ_KEY`` values in the layout of Java's ``MessageClientIDSetter``.

    Uniqueness comes from the fixed prefix (ip, pid, ``loader_hash``), the ms since the
    start of the month, and a 16-bit counter. A generator is not thread-safe; keep one
    per client instance (they are used from the event loop only).

    Args:
        ip: the client's IP, as text or as 4/16 packed bytes.
        pid: the process id (only its low 16 bits are kept, as Java's ``(short)``).
        clock: wall-clock source (``now_ms``).
        loader_hash: stands in for Java's classloader hash, which tells apart
            producers sharing one process; defaults to ``id(self)`` for the same reason.
        tz: time zone whose months are counted; None means local time, as Java.
    """

    __slots__ = (
        "_clock", "_counter", "_last_ms", "_next_start_ms", "_prefix", "_start_ms",
        "_timed_prefix", "_tz",
    )  # fmt: skip

    def __init__(
        self,
        ip: str | bytes,
        pid: int,
        *,
        clock: Clock | None = None,
        loader_hash: int | None = None,
        tz: tzinfo | None = None,
    ) -> None:
        ip_raw = pack_ip(ip) if isinstance(ip, str) else bytes(ip)
        if len(ip_raw) not in (4, 16):
            raise LocalProtocolError(f"an IP address has 4 or 16 bytes, not {len(ip_raw)}")
        hash_value = id(self) if loader_hash is None else loader_hash
        fixed = ip_raw + struct.pack(">HI", pid & 0xFFFF, hash_value & 0xFFFFFFFF)
        self._prefix = fixed.hex().upper()
        self._clock: Clock = SystemClock() if clock is None else clock
        self._tz = tz
        self._counter = 0
        self._start_ms, self._next_start_ms = _month_bounds_ms(self._clock.now_ms(), tz)
        # The prefix with the time field of the last millisecond: many ids share one.
        self._last_ms = -1
        self._timed_prefix = ""

    @property
    def prefix(self) -> str:
        """The fixed hex prefix: ip, pid and loader hash."""
        return self._prefix

    def next_id(self) -> str:
        """Return a new UNIQ_KEY (32 hex chars for an IPv4 client, 56 for IPv6)."""
        now_ms = self._clock.now_ms()
        counter = self._counter
        self._counter = counter + 1
        if now_ms != self._last_ms:
            self._timed_prefix = self._prefix + self._time_field(now_ms)
            self._last_ms = now_ms
        return f"{self._timed_prefix}{counter & 0xFFFF:04X}"

    def _time_field(self, now_ms: int) -> str:
        """The 8 hex digits of the ms since the start of the month."""
        if now_ms >= self._next_start_ms:
            self._start_ms, self._next_start_ms = _month_bounds_ms(now_ms, self._tz)
        # Java casts the difference to int: a 31-day month overflows it after ~24.8
        # days, and the id simply carries the wrapped 32 bits.
        diff = ((now_ms - self._start_ms + 0x80000000) & 0xFFFFFFFF) - 0x80000000
        if -1_000_000 < diff < 0:
            # The clock stepped back a little (NTP): Java writes 0 rather than a
            # wrapped negative number.
            diff = 0
        return f"{diff & 0xFFFFFFFF:08X}"


def build_client_id(
    ip: str,
    instance_name: str,
    pid: int,
    *,
    unit_name: str | None = None,
    nano_time: int | None = None,
) -> str:
    """Build a client id like Java 4.9's ``ClientConfig.buildMQClientId``.

    Java clients first replace the instance name ``"DEFAULT"`` by ``"<pid>#<nanoTime>"``
    (``changeInstanceNameToPID``), then join ``ip@instance[@unitName]``.

    Args:
        ip: the client IP.
        instance_name: the configured instance name.
        pid: the process id, used when ``instance_name`` is ``"DEFAULT"``.
        unit_name: appended after another ``@`` when not blank.
        nano_time: Java's ``System.nanoTime()`` part; without it a ``"DEFAULT"``
            instance becomes just ``"<pid>"``, the form of RocketMQ 4.8 and earlier.

    Returns:
        e.g. ``"10.0.0.5@12345#9876543210"``.
    """
    if instance_name == "DEFAULT":
        instance_name = str(pid) if nano_time is None else f"{pid}#{nano_time}"
    client_id = f"{ip}@{instance_name}"
    if unit_name and not unit_name.isspace():
        client_id += f"@{unit_name}"
    return client_id


#: ``common/_record_kernels.pyx`` when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.common._record_kernels")
