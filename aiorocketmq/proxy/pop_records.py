"""POP in-flight state as records: checkpoints, acks and receipt handles.

Owns the formats that make POP consumption durable, after RocketMQ 5's revive log
(``PopCheckPoint`` / ``AckMsg`` in ``rmq_sys_REVIVE_LOG_<cluster>``):

* a **checkpoint** (CK) names one popped batch of one queue: group, stored topic,
  queue, the queue offsets handed out, pop time, invisible time, whether it is an
  orderly (FIFO) batch and, for those, how many times the batch was delivered
  before and where the group's offset goes once it is acked;
* an **ack** names a CK and the offsets of it that are done (acked by a client,
  or re-enqueued by the revive step, or forwarded to the DLQ).

Both are stored as small JSON bodies of messages in the revive topic (queue 0),
so they reach the disk through the CommitLog like any message and a restart
replays them (``pop.PopService``). Field names are short, as RocketMQ's.

A **receipt handle** is what a client gets for each message and sends back to
ack or change it: ``v1 <ckId> <topic> <queueId> <queueOffset> <popTime>
<invisibleMs>``. Clients treat it as opaque; the server checks expiry against the
CK, not the handle (a CK may be extended after the handle was made).

Must not: do I/O (the pop service writes and reads the records).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "ACK_TAG",
    "CK_TAG",
    "Checkpoint",
    "ReceiptHandle",
    "ack_body",
    "decode_record_body",
    "new_ck_id",
]

CK_TAG: Final = "ck"
ACK_TAG: Final = "ack"
_HANDLE_VERSION: Final = "v1"
_HANDLE_FIELDS: Final = 7


def new_ck_id() -> str:
    """A CK id unique across restarts (random: no counter to persist)."""
    return secrets.token_hex(8)


@dataclass(slots=True)
class Checkpoint:
    """One popped batch of one queue, in flight until every offset is done.

    Attributes:
        ck_id: unique id (the receipt handles name it).
        group: consumer group.
        topic: stored topic (the real topic, or the group's pop-retry topic).
        queue_id: queue of ``topic``.
        offsets: queue offsets handed out, ascending.
        pop_time: when they were handed out (ms).
        invisible_ms: how long they stay invisible.
        orderly: a FIFO batch: it blocks its queue for the group until done, and
            comes back as the same offsets (no copy) when it expires.
        attempt: orderly only: deliveries of this batch before this one.
        next_offset: orderly only: the group's offset once the batch is done.
        done: offsets acked, revived or dead-lettered.
        record_offset: queue offset of the CK record in the revive topic (-1
            until written); the revive position never passes a live CK's record.
    """

    ck_id: str
    group: str
    topic: str
    queue_id: int
    offsets: list[int]
    pop_time: int
    invisible_ms: int
    orderly: bool = False
    attempt: int = 0
    next_offset: int = -1
    done: set[int] = field(default_factory=set)
    record_offset: int = -1

    @property
    def deadline(self) -> int:
        """When un-acked offsets become visible again (ms)."""
        return self.pop_time + self.invisible_ms

    @property
    def pending(self) -> list[int]:
        """Offsets not done yet."""
        return [o for o in self.offsets if o not in self.done]

    def to_body(self) -> bytes:
        """The CK record's body."""
        doc: dict[str, Any] = {
            "id": self.ck_id,
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "o": self.offsets,
            "pt": self.pop_time,
            "it": self.invisible_ms,
        }
        if self.orderly:
            doc.update(ord=True, a=self.attempt, no=self.next_offset, d=sorted(self.done))
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Checkpoint:
        """A CK from a decoded record body (raises KeyError/TypeError/ValueError)."""
        return cls(
            ck_id=str(doc["id"]),
            group=str(doc["c"]),
            topic=str(doc["t"]),
            queue_id=int(doc["q"]),
            offsets=[int(o) for o in doc["o"]],
            pop_time=int(doc["pt"]),
            invisible_ms=int(doc["it"]),
            orderly=bool(doc.get("ord", False)),
            attempt=int(doc.get("a", 0)),
            next_offset=int(doc.get("no", -1)),
            done={int(o) for o in doc.get("d", ())},
        )

    def handle(self, queue_offset: int) -> ReceiptHandle:
        """The receipt handle of one of this CK's offsets."""
        return ReceiptHandle(
            self.ck_id, self.topic, self.queue_id, queue_offset, self.pop_time, self.invisible_ms
        )


def ack_body(ck_id: str, offsets: list[int]) -> bytes:
    """An ack record's body."""
    return json.dumps({"id": ck_id, "o": offsets}, separators=(",", ":")).encode()


def decode_record_body(body: bytes) -> dict[str, Any] | None:
    """A revive record's JSON object, or None when it is not one (skipped, logged by
    the caller)."""
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and "id" in doc else None


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """What a client holds for one received message."""

    ck_id: str
    topic: str
    queue_id: int
    queue_offset: int
    pop_time: int
    invisible_ms: int

    def encode(self) -> str:
        """The handle's text (topic names never hold spaces: validated on create)."""
        return (
            f"{_HANDLE_VERSION} {self.ck_id} {self.topic} {self.queue_id} "
            f"{self.queue_offset} {self.pop_time} {self.invisible_ms}"
        )

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        """Read a handle; ``ValueError`` when it is not one of ours."""
        parts = text.split(" ")
        if len(parts) != _HANDLE_FIELDS or parts[0] != _HANDLE_VERSION or not parts[1]:
            raise ValueError(f"not a receipt handle: {text[:80]!r}")
        return cls(parts[1], parts[2], int(parts[3]), int(parts[4]), int(parts[5]), int(parts[6]))
