"""DispatchRequestBuilder: a CommitLog record, or a put's own fields, -> its DispatchRequest.

Owns: the tagsCode rules (specs/store.md §8.2, ``checkMessageAndReturnSize``):
``hashCode(TAGS)``, 0 without tags, remembered per TAGS value since messages repeat a
few; for a ``SCHEDULE_TOPIC_XXXX`` record carrying ``DELAY``, the deliver time =
STORETIMESTAMP + the level's delay, the level clamped to the highest one. And the
two ways a request is made: from a scanned record (the dispatcher's loop, recovery,
a slave), or completed from the properties string a single put just stored (the
master's inline dispatch, which reads nothing back), plus the check that both ways
agree (``verify_writes``).

``walk`` gives a slice's records as requests: runs of sound records by the C kernel
(``common/_record_kernels.pyx``, built as ``from_record`` builds them, a bounded run
at a time), and from the first record it does not take (a schedule-topic record,
anything not sound, the end) the ``RecordScanner``, whose ``stop`` tells why the walk
ended.

Must not: touch files, queues or the index (the dispatcher does), or build a
put's request for the schedule topic: its tagsCode needs the record's DELAY rules.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Final

from aiorocketmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.message_codec import RecordScanner, RecordView
from aiorocketmq.common.properties import MessageConst, select_properties
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.store.dispatch_request import DispatchRequest
from aiorocketmq.store.errors import StoreError
from aiorocketmq.store.inner_message import parse_delay_level

log = logging.getLogger(__name__)

_TAGS_CACHE_MAX: Final = 4096  # distinct TAGS values remembered; a topic has few
#: Records the kernel builds per call. The dispatcher checks its time budget after each
#: run and may stop a step mid-run (the rest is built again next step), so a run
#: stays small: little waste, and far under a step's time budget.
_KERNEL_RUN: Final = 64
_SCHEDULE_TOPIC_RAW: Final = RMQ_SYS_SCHEDULE_TOPIC.encode()
_DISPATCH_PROPERTIES: Final = (
    MessageConst.PROPERTY_TAGS,
    MessageConst.PROPERTY_KEYS,
    MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
"""What a request needs of a record's properties; the map is parsed only when asked."""


class RecordWalk:
    """Where ``DispatchRequestBuilder.walk`` keeps its scanner (its ``stop`` at the end)."""

    __slots__ = ("scanner",)

    def __init__(self) -> None:
        self.scanner: RecordScanner | None = None


class DispatchRequestBuilder:
    """Builds DispatchRequests; see the module docstring.

    Args:
        delays_ms: the delay levels' delays, level 1 first (``messageDelayLevel``).
    """

    __slots__ = ("_delays_ms", "_tags_codes")

    def __init__(self, delays_ms: tuple[int, ...]) -> None:
        self._delays_ms = delays_ms
        self._tags_codes: dict[str | None, int] = {}

    def from_record(self, record: RecordView) -> DispatchRequest:
        """The request of a scanned record."""
        props = record.properties
        code = self.tags_code(props.get(MessageConst.PROPERTY_TAGS))
        if record.topic == RMQ_SYS_SCHEDULE_TOPIC:
            code = self._deliver_time(props, record.store_timestamp, code)
        return DispatchRequest.from_record(record, code)

    def walk(
        self, view: memoryview, walk: RecordWalk
    ) -> Iterator[tuple[list[DispatchRequest], list[int]]]:
        """The records of ``view`` in order, in runs: ``(requests, ends)``, each end
        where its record ends in ``view``; see the module docstring.

        A kernel run holds up to ``_KERNEL_RUN`` records, a scanned one a single
        record: the caller's per-record work is a list extend, not a loop step.
        ``walk.scanner`` holds the scanner (and, once the walk is exhausted, its stop).
        """
        pos = 0
        if _KERNEL is not None:
            while True:
                requests, ends, after = _KERNEL.dispatch_requests(
                    view, pos, _KERNEL_RUN, DispatchRequest, select_properties,
                    _DISPATCH_PROPERTIES, self.tags_code, _SCHEDULE_TOPIC_RAW,
                )  # fmt: skip
                if requests:
                    yield requests, ends
                pos = after
                if len(requests) < _KERNEL_RUN:
                    break  # the kernel stopped before a record: the scanner decides it
        scanner = walk.scanner = RecordScanner(view, pos)
        for record in scanner:
            yield [self.from_record(record)], [record.end]

    def complete_put(self, request: DispatchRequest, properties: str) -> None:
        """Fill in what the stored ``properties`` give, parsed as a scanned record's.

        A record's strings are the put's strings (encoded with surrogateescape,
        decoded with it), so the result is what ``from_record`` would give.
        """
        if request.topic == RMQ_SYS_SCHEDULE_TOPIC:
            raise ValueError("a schedule-topic record's tagsCode needs from_record")
        request.properties_raw = properties
        request.tags_code, request.keys, request.uniq_key = self.put_fields(properties)

    def put_fields(self, properties: str) -> tuple[int, str | None, str | None]:
        """tagsCode, ``KEYS`` and ``UNIQ_KEY`` of a put's stored ``properties`` (not for
        the schedule topic), parsed as a scanned record's: ``complete_put`` without the
        request, for the dispatcher's fields way."""
        tags, keys, uniq_key = select_properties(properties, _DISPATCH_PROPERTIES)
        code = self._tags_codes.get(tags)
        if code is None:
            code = self.tags_code(tags)
        return code, keys, uniq_key

    def check_put(self, request: DispatchRequest, stored: memoryview) -> None:
        """``verify_writes``: ``request`` equals ``from_record`` of the record in ``stored``.

        Raises:
            StoreError: they differ (a bug in the put's request; the store stops).
        """
        expected = self.from_record(next(iter(RecordScanner(stored))))
        if expected != request:
            raise StoreError(f"a put's dispatch request {request} != the record's {expected}")

    def tags_code(self, tags: str | None) -> int:
        """``tags_code(tags)``, remembered (a dict hit is cheaper than even the C hash)."""
        code = self._tags_codes.get(tags)
        if code is None:
            if len(self._tags_codes) >= _TAGS_CACHE_MAX:
                self._tags_codes.clear()
            code = self._tags_codes[tags] = tags_code(tags)
        return code

    def _deliver_time(self, props: dict[str, str], store_timestamp: int, tags: int) -> int:
        """tagsCode of a schedule-topic record: store time + the DELAY level's delay."""
        if MessageConst.PROPERTY_DELAY_TIME_LEVEL not in props:
            return tags
        level = parse_delay_level(props)
        if level is None:
            # Java's Integer.parseInt would fail the record; the put path refuses such
            # messages, so this only comes from a foreign CommitLog: keep the tag hash.
            log.warning("schedule record with an unparseable DELAY: %r", props)
            return tags
        level = min(level, len(self._delays_ms))
        if level <= 0:
            return tags
        return store_timestamp + self._delays_ms[level - 1]


#: The record kernels (``common/_record_kernels.pyx``) when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.common._record_kernels")
