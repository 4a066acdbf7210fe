"""Mutation fuzzing of the body decoders: records, batches, properties, JSON bodies, HA.

Each test feeds ``AIOROCKETMQ_FUZZ_CASES`` (default 100,000) mutated inputs to one
decoder, seeded from captured bytes (CommitLog records and client frame bodies in
``tests/vectors``) or from our encoders' output, and fails on any exception
other than the documented ones: ``RemoteProtocolError`` (``BlankRecordError`` and
``HAProtocolError`` are subclasses) for decoders that reject, none at all for
``scan_records`` and ``string_to_properties`` ("never raises"). A decoded record's
lazily read fields (properties, tags, keys, hosts, msg id) are read too.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Callable

import pytest

from aiorocketmq.broker.ha.codec import (
    HAProtocolError,
    ReportDecoder,
    TransferDecoder,
    encode_header,
    encode_report,
)
from aiorocketmq.common import fastjson
from aiorocketmq.common.batch_codec import decode_batch, decode_batch_entries, encode_batch
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.common.message_codec import (
    RecordView,
    decode_pull_body,
    decode_record,
    scan_records,
)
from aiorocketmq.common.properties import string_to_properties
from aiorocketmq.common.protocol_bodies import (
    ConsumerConnection,
    ConsumerListBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    ProducerConnection,
    UnlockBatchRequestBody,
)
from aiorocketmq.common.topic_config import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.remoting.frame import decode_frame_payload
from tests.fuzz.mutate import FuzzReport, all_frames, run_fuzz, stored_records

pytestmark = pytest.mark.fuzz

RECORDS = stored_records()
BODIES = [
    bytes(cmd.body)
    for cmd in (decode_frame_payload(f[4:]) for f in all_frames())
    if cmd.body and cmd.body[:1] in (b"{", b"[")
]


def _assert_clean(report: FuzzReport, *, rejects: bool = True) -> None:
    assert not report.findings, "\n\n".join(report.findings)
    assert report.accepted >= 1, report.summary()
    if rejects:
        assert report.rejected >= 1, report.summary()


def _touch(record: RecordView) -> None:
    """Read every lazily decoded field, as the broker and the clients do."""
    _ = (record.properties, record.tags, record.keys, record.uniq_key, record.tags_code)
    _ = (record.born_host, record.store_host, record.msg_id, record.body, record.topic)


def test_decode_record() -> None:
    def decode(data: bytes) -> None:
        _touch(decode_record(data, check_crc=len(data) % 2 == 0))

    _assert_clean(run_fuzz("decode_record", RECORDS, decode, (RemoteProtocolError,)))


def test_scan_records_never_raises() -> None:
    seeds = [b"".join(RECORDS[i : i + 3]) for i in range(len(RECORDS))]

    def scan(data: bytes) -> None:
        records, stop = scan_records(data, check_crc=True)
        for record in records:
            _touch(record)
        assert stop.reason is not None

    _assert_clean(run_fuzz("scan_records", seeds, scan, ()), rejects=False)


def test_decode_pull_body() -> None:
    seeds = [b"".join(RECORDS[i : i + 4]) for i in range(len(RECORDS))]

    def decode(data: bytes) -> None:
        for record in decode_pull_body(data):
            _touch(record)

    _assert_clean(run_fuzz("decode_pull_body", seeds, decode, (RemoteProtocolError,)))


def _batch_seeds() -> list[bytes]:
    seeds = [
        encode_batch(
            Message("T", f"body-{i}".encode() * i, i, {"TAGS": f"t{i}", "KEYS": "k1 k2"})
            for i in range(n)
        )
        for n in (1, 2, 5)
    ]
    for frame in all_frames():
        cmd = decode_frame_payload(frame[4:])
        if cmd.ext_fields.get("batch") == "true" or cmd.ext_fields.get("m") == "true":
            seeds.append(bytes(cmd.body))
    return seeds


def test_decode_batch() -> None:
    def decode(data: bytes) -> None:
        for entry in decode_batch_entries(data, max_messages=64):
            _ = entry.properties
        decode_batch(data, topic="T", max_messages=64)

    _assert_clean(run_fuzz("decode_batch", _batch_seeds(), decode, (RemoteProtocolError,)))


def test_string_to_properties_never_raises() -> None:
    seeds = [
        b"TAGS\x01TagA\x02KEYS\x01k1 k2\x02WAIT\x01true\x02",
        b"UNIQ_KEY\x01C0A80001\x02\x01\x02a\x01b\x01c",
        b"",
    ] + [bytes.fromhex(v) for v in ("0102", "01", "02")]

    def parse(data: bytes) -> None:
        result = string_to_properties(data.decode("utf-8", "surrogateescape"))
        assert all(name and value for name, value in result.items())

    _assert_clean(run_fuzz("string_to_properties", seeds, parse, ()), rejects=False)


def test_fastjson_loads() -> None:
    seeds = [*BODIES, b'{"brokerAddrs":{0:"127.0.0.1:10911",1:"x"},"n":[1,2.5,true,null]}']
    assert len(seeds) > 20
    _assert_clean(run_fuzz("fastjson.loads", seeds, fastjson.loads, (RemoteProtocolError,)))


def _body_seeds() -> list[bytes]:
    mqs = [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)]
    return [
        *BODIES,
        ConsumerListBody(["c1", "c2"]).encode(),
        LockBatchRequestBody("G", "cid", mqs).encode(),
        LockBatchResponseBody(mqs).encode(),
    ]


def test_protocol_bodies() -> None:
    decoders: list[Callable[[bytes], object]] = [
        HeartbeatData.decode,
        ConsumerListBody.decode,
        LockBatchRequestBody.decode,
        UnlockBatchRequestBody.decode,
        LockBatchResponseBody.decode,
        ProducerConnection.decode,
        ConsumerConnection.decode,
    ]
    turn = itertools.cycle(decoders)

    def decode(data: bytes) -> None:
        next(turn)(data)

    _assert_clean(run_fuzz("protocol bodies", _body_seeds(), decode, (RemoteProtocolError,)))


def _register_body() -> RegisterBrokerBody:
    table = {
        name: TopicConfig(name, 4, 4, 6, "SINGLE_TAG", 0, order=name == "B")
        for name in ("TopicTest", "B", "%RETRY%G")
    }
    return RegisterBrokerBody(
        TopicConfigSerializeWrapper(table, DataVersion(1_700_000_000_000, 7)), ["10.0.0.1:1"]
    )


def test_register_broker_body_json() -> None:
    seeds = [_register_body().encode(compressed=False)]
    report = run_fuzz(
        "RegisterBrokerBody json", seeds, RegisterBrokerBody.decode, (RemoteProtocolError,)
    )
    _assert_clean(report)


def test_register_broker_body_compressed() -> None:
    body = _register_body()
    inflated = zlib.decompress(body.encode(compressed=True))
    turn = itertools.count()

    def decode(data: bytes) -> None:
        # Mostly mutate the inflated payload (structure), sometimes the zlib stream.
        if next(turn) % 4:
            data = zlib.compress(data, 1)
        RegisterBrokerBody.decode(data, compressed=True)

    report = run_fuzz("RegisterBrokerBody compressed", [inflated], decode, (RemoteProtocolError,))
    _assert_clean(report)


def test_ha_report_decoder() -> None:
    seeds = [b"".join(encode_report(o) for o in (0, 1, 2**40, 2**63 - 1))]

    def decode(data: bytes) -> None:
        decoder = ReportDecoder()
        decoder.feed(data[:5])
        decoder.feed(data[5:])

    _assert_clean(run_fuzz("HA ReportDecoder", seeds, decode, (HAProtocolError,)))


def test_ha_transfer_decoder() -> None:
    frames = [
        encode_header(o, len(b)) + b for o, b in ((0, b""), (4096, b"x" * 40), (2**40, RECORDS[0]))
    ]
    seeds = [b"".join(frames), frames[2], struct.pack(">qi", 0, 0)]

    def decode(data: bytes) -> None:
        decoder = TransferDecoder(max_body_size=1 << 16)
        decoder.feed(data[:7])
        decoder.feed(data[7:])
        assert decoder.buffered <= len(data)

    _assert_clean(run_fuzz("HA TransferDecoder", seeds, decode, (HAProtocolError,)))
