"""Seeded byte mutations and the plain-loop fuzz runner the fuzz tests share.

Owns: the captured client frames (``tests/vectors``) as seeds, a cheap
deterministic mutator (bit flips, byte sets, "interesting" integers, inserts,
deletes, truncations, duplications, splices with another seed, digit runs), and
``run_fuzz``, which feeds N mutated inputs to one decoder and collects every exception that is
not one of the decoder's documented error types.

Must not: hide a finding: ``run_fuzz`` returns every unexpected exception with the
input that raised it, and the tests assert the list is empty.

Case count: ``AIOROCKETMQ_FUZZ_CASES`` (default 100,000 per decoder) for the
mutation loops; nightly runs raise it, e.g. ``AIOROCKETMQ_FUZZ_CASES=5000000``.
"""

from __future__ import annotations

import json
import os
import random
import struct
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tests.support.vectors import load_jsonl

CASES_ENV = "AIOROCKETMQ_FUZZ_CASES"
DEFAULT_CASES = 100_000

#: Boundary values a length or offset field is most likely to mishandle.
_INTERESTING = [
    struct.pack(">i", v)
    for v in (0, 1, -1, 4, 7, 8, 0x7F, 0x80, 0xFF, 0xFFFF, 0x7FFFFFFF, -(2**31), 2**24 - 1)
] + [b"\x00", b"\xff", b"\x7f", b"\x80", b'"', b"{", b"}", b"[", b"\\", b"\x01", b"\x02"]


#: Header values a typed header or processor is most likely to mishandle.
_ODD_VALUES: list[object] = [
    "", "-1", "0", "1", "2147483648", "-9223372036854775809", "9" * 40, "true", "null",
    "%RETRY%", "\x01\x02", "a" * 300, "9" * 4301, "DELAY\x01" + "9" * 4301, "TBW102",
    "SCHEDULE_TOPIC_XXXX", -1, 2**63, 1.5, True, None, [], {"x": 1},
]  # fmt: skip
_FIELD_NAMES = [
    "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset", "batch",
    "suspendTimeoutMillis", "subscription", "subVersion", "consumerGroup", "producerGroup",
    "properties", "flag", "bornTimestamp", "reconsumeTimes", "a", "b", "e", "m", "offset",
    "brokerName", "clientID", "unitMode", "compressed", "delayLevel", "originTopic",
]  # fmt: skip


def fuzz_cases(default: int = DEFAULT_CASES) -> int:
    """Cases per decoder: ``$AIOROCKETMQ_FUZZ_CASES`` or ``default``."""
    text = os.environ.get(CASES_ENV, "").strip()
    return int(text) if text else default


def client_frames() -> list[bytes]:
    """Every frame the stock C++ client and ali-ons sent, as captured (length prefix included)."""
    frames: list[bytes] = []
    for name in ("cpp_client.jsonl", "alions_client.jsonl"):
        frames += [
            bytes.fromhex(v["frame_hex"]) for v in load_jsonl(name) if v["origin"] == "client"
        ]
    return frames


def all_frames() -> list[bytes]:
    """Client frames plus the test double's replies (response decoders read those)."""
    frames: list[bytes] = []
    for name in ("cpp_client.jsonl", "alions_client.jsonl"):
        frames += [bytes.fromhex(v["frame_hex"]) for v in load_jsonl(name)]
    return frames


def stored_records() -> list[bytes]:
    """The captured CommitLog v1 records."""
    return [bytes.fromhex(v["record_hex"]) for v in load_jsonl("stored_messages.jsonl")]


class Mutator:
    """Deterministic mutations of seed inputs (one ``random.Random`` per run)."""

    def __init__(self, seeds: Sequence[bytes], seed: int = 0) -> None:
        if not seeds:
            raise ValueError("a mutator needs at least one seed")
        self._seeds = list(seeds)
        self._rng = random.Random(seed)

    def one(self) -> bytes:
        """A seed with 1-4 stacked mutations."""
        rng = self._rng
        data = bytearray(rng.choice(self._seeds))
        for _ in range(rng.randint(1, 4)):
            self._mutate(data, rng)
        return bytes(data)

    def _mutate(self, data: bytearray, rng: random.Random) -> None:
        size = len(data)
        kind = rng.randrange(9)
        pos = rng.randrange(size + 1)
        if kind == 0 and size:
            data[pos % size] ^= 1 << rng.randrange(8)
        elif kind == 1 and size:
            data[pos % size] = rng.randrange(256)
        elif kind == 2:
            data[pos:pos] = rng.randbytes(rng.randint(1, 16))
        elif kind == 3 and size:
            del data[pos : pos + rng.randint(1, 32)]
        elif kind == 4:
            del data[rng.randrange(size + 1) :]
        elif kind == 5:
            chunk = data[pos : pos + rng.randint(1, 64)]
            data[pos:pos] = chunk
        elif kind == 6:
            value = rng.choice(_INTERESTING)
            data[pos : pos + len(value)] = value
        elif kind == 7:
            other = rng.choice(self._seeds)
            cut = rng.randrange(len(other) + 1)
            data[pos:] = other[cut:]
        else:
            # A run of digits: int32/int64 edges, and past Python's 4,300-digit
            # int() limit, where int() raises ValueError instead of parsing.
            data[pos:pos] = rng.choice([b"1", b"9"]) * rng.choice([10, 19, 20, 40, 4301])


class FrameMutator:
    """Mutations of whole frames that keep the framing valid most of the time.

    A third of the frames are raw byte mutations (the framing usually breaks and the
    server must drop the stream); the others mutate only the header or only the
    body and rewrite both length fields, so the frame reaches the header decoder,
    the typed headers and the request processors.
    """

    def __init__(self, frames: Sequence[bytes], seed: int = 0) -> None:
        self._frames = list(frames)
        self._rng = random.Random(seed)
        self._raw = Mutator(frames, seed)
        headers, bodies = zip(*(_split_frame(f) for f in frames), strict=True)
        self._headers = Mutator(headers, seed + 1)
        self._bodies = Mutator([b for b in bodies if b] or [b"{}"], seed + 2)

    def one(self, *, keep_framing: bool = False) -> bytes:
        """One mutated frame.

        ``keep_framing`` leaves out the raw and header byte mutations: the frame then
        decodes and reaches a processor (body bytes or header values mutated).
        """
        kind = self._rng.randrange(2, 4) if keep_framing else self._rng.randrange(4)
        if kind == 0:
            return self._raw.one()
        header, body = _split_frame(self._rng.choice(self._frames))
        if kind == 1:
            header = self._headers.one()
        elif kind == 2:
            body = self._bodies.one()
        else:
            header = self._header_values(header)
        return join_frame(header, body)

    def _header_values(self, header: bytes) -> bytes:
        """Change a field of the JSON header: a code, flag, or extFields name or value."""
        rng = self._rng
        obj = json.loads(header)
        ext: dict[str, object] = obj.setdefault("extFields", {})
        kind = rng.randrange(5)
        if kind == 0:
            obj["code"] = rng.choice([rng.randrange(-5, 400), obj["code"] + rng.randrange(-3, 4)])
        elif kind == 1:
            # Valid at the frame level (the raw mutations cover the rest): the frame
            # must still reach a processor.
            name = rng.choice(["flag", "version", "opaque"])
            obj[name] = rng.choice([0, 1, 2, 3, -1, 2**31 - 1, -(2**31), rng.randrange(2**31)])
        elif kind == 2 and ext:
            del ext[rng.choice(sorted(ext))]
        elif kind == 3 and ext:
            name = rng.choice(sorted(ext))
            ext[name] = rng.choice([*_ODD_VALUES, self._headers.one().decode("utf-8", "replace")])
        else:
            ext[rng.choice(_FIELD_NAMES)] = rng.choice(_ODD_VALUES)
        return json.dumps(obj).encode()


def _split_frame(frame: bytes) -> tuple[bytes, bytes]:
    header_len = int.from_bytes(frame[4:8], "big") & 0xFFFFFF
    return frame[8 : 8 + header_len], frame[8 + header_len :]


def join_frame(header: bytes, body: bytes, serialize_type: int = 0) -> bytes:
    """A frame with consistent length fields around ``header`` and ``body``."""
    info = (serialize_type << 24) | len(header)
    return struct.pack(">ii", 4 + len(header) + len(body), info) + header + body


@dataclass
class FuzzReport:
    """What one fuzz loop saw."""

    name: str
    cases: int = 0
    accepted: int = 0
    rejected: int = 0
    seconds: float = 0.0
    findings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        rate = self.cases / self.seconds if self.seconds else 0.0
        return (
            f"fuzz {self.name}: {self.cases} cases in {self.seconds:.2f} s "
            f"({rate:,.0f} cases/s), {self.accepted} accepted, {self.rejected} rejected, "
            f"{len(self.findings)} findings"
        )


def run_fuzz(
    name: str,
    seeds: Sequence[bytes],
    target: Callable[[bytes], object],
    allowed: tuple[type[BaseException], ...],
    *,
    cases: int | None = None,
    seed: int = 0,
    max_findings: int = 5,
) -> FuzzReport:
    """Feed ``cases`` mutated seeds to ``target``; anything outside ``allowed`` is a finding.

    Every seed is fed unmutated first, so a decoder that rejects its own valid input
    shows up as ``rejected`` counts the caller can check.
    """
    total = fuzz_cases() if cases is None else cases
    report = FuzzReport(name)
    mutator = Mutator(seeds, seed)
    started = time.perf_counter()
    inputs: list[bytes] = list(seeds)
    for index in range(total):
        data = inputs[index] if index < len(inputs) else mutator.one()
        try:
            target(data)
        except allowed:
            report.rejected += 1
        except Exception as exc:  # the point of the loop: anything else is a finding
            report.findings.append(
                f"{type(exc).__name__}: {exc} on input {data.hex()}\n"
                + "".join(traceback.format_exception(exc)[-3:])
            )
            if len(report.findings) >= max_findings:
                break
        else:
            report.accepted += 1
        report.cases += 1
    report.seconds = time.perf_counter() - started
    sys.stdout.write(report.summary() + "\n")
    return report
