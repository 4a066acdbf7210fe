"""Hypothesis property tests with structure-aware inputs for the decoders.

Valid values built from strategies must round-trip (any chunking of a frame or HA
stream decodes the same); values that keep the structure but break one rule
(a byte changed in a record, a frame with random header bytes, extFields with odd
values, truncated batches) must give only the decoder's documented error. A few
hundred examples each (``FUZZ_EXAMPLES``), no deadline: the machine is shared.
"""

from __future__ import annotations

import contextlib
import json
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiorocketmq.broker.ha.codec import HAProtocolError, TransferDecoder, TransferFrame
from aiorocketmq.common import fastjson
from aiorocketmq.common.batch_codec import decode_batch, encode_batch
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import Message
from aiorocketmq.common.message_codec import decode_record, encode_record
from aiorocketmq.common.properties import properties_to_string, string_to_properties
from aiorocketmq.common.topic_config import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.remoting.codes import LanguageCode, SerializeType
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.errors import HeaderFieldError
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from tests.fuzz.test_frame_fuzz import _header_classes

pytestmark = pytest.mark.fuzz

FUZZ_EXAMPLES = 300
fuzz_settings = settings(
    max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

names = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)
short_int = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)


@st.composite
def commands(draw: st.DrawFn) -> RemotingCommand:
    serialize_type = draw(st.sampled_from(list(SerializeType)))
    return RemotingCommand(
        code=draw(short_int),
        opaque=draw(int32),
        flag=draw(int32),
        language=draw(st.sampled_from(list(LanguageCode))),
        version=draw(short_int),
        remark=draw(st.none() | names.filter(bool)),
        ext_fields=draw(st.dictionaries(names, names, max_size=6)),
        body=draw(st.binary(max_size=100)),
        serialize_type=serialize_type,
    )


@fuzz_settings
@given(st.lists(commands(), min_size=1, max_size=3), st.data())
def test_frames_round_trip_under_any_chunking(
    cmds: list[RemotingCommand], data: st.DataObject
) -> None:
    stream = b"".join(encode_frame(cmd) for cmd in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    got: list[RemotingCommand] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        got += decoder.feed(stream[start:end])
    assert decoder.buffered == 0
    assert len(got) == len(cmds)
    for sent, back in zip(cmds, got, strict=True):
        assert (back.code, back.opaque, back.flag, back.language, back.version) == (
            sent.code, sent.opaque, sent.flag, sent.language, sent.version,
        )  # fmt: skip
        assert back.remark == sent.remark
        assert back.ext_fields == sent.ext_fields
        assert bytes(back.body) == sent.body


@fuzz_settings
@given(st.sampled_from([0, 1, 2, 3, 255]), st.binary(max_size=120), st.binary(max_size=40))
def test_frames_with_random_headers_only_raise_protocol_errors(
    serialize_type: int, header: bytes, body: bytes
) -> None:
    frame = struct.pack(">iI", 4 + len(header) + len(body), serialize_type << 24 | len(header))
    try:
        (cmd,) = FrameDecoder().feed(frame + header + body)
    except RemoteProtocolError:
        return
    assert bytes(cmd.body) == body
    assert all(isinstance(v, str) for v in cmd.ext_fields.values())


odd_values = st.one_of(
    names,
    st.integers().map(str),
    st.sampled_from(["true", "false", "0", "1", "", " 1", "1_0", "+5", "-0", "0x10", "1e3"]),
    st.sampled_from(["9" * 4301, "-" + "0" * 4400 + "1", "9" * 19, "9" * 20]),
)


@fuzz_settings
@given(st.data())
def test_typed_headers_only_raise_header_field_errors(data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(_header_classes()))
    # Names RocketMQ headers use, so most draws set fields the class really reads.
    fields = data.draw(st.dictionaries(st.sampled_from(_field_names()), odd_values, max_size=12))
    try:
        cls.from_ext_fields(fields)
    except HeaderFieldError:
        pass


def _field_names() -> list[str]:
    return sorted(
        {
            "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
            "suspendTimeoutMillis", "subscription", "subVersion", "expressionType",
            "consumerGroup", "producerGroup", "defaultTopic", "defaultTopicQueueNums",
            "properties", "flag", "bornTimestamp", "reconsumeTimes", "unitMode", "batch",
            "maxReconsumeTimes", "msgId", "offset", "brokerName", "brokerAddr",
            "clusterName", "brokerId", "haServerAddr", "compressed", "bodyCrc32", "clientID",
            "group", "originMsgId", "originTopic",
            "delayLevel", "timestamp", "namespace", "key", "value", "minOffset", "maxOffset",
            "nextBeginOffset", "suggestWhichBrokerId", "a", "b", "c", "d", "e", "f", "g", "h",
            "i", "j", "k", "l", "m", "n", "transactionId", "wipeTopicCount", "addTopicCount",
        }
    )  # fmt: skip


hosts = st.tuples(
    st.sampled_from(["127.0.0.1", "10.1.2.3", "::1", "fe80::1"]), st.integers(0, 65535)
)


@fuzz_settings
@given(
    topic=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=60),
    body=st.binary(max_size=300),
    props=st.dictionaries(
        st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=8),
        st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=20),
        max_size=4,
    ),
    born=hosts,
    store=hosts,
    flip=st.integers(min_value=0),
    value=st.integers(0, 255),
)
def test_records_round_trip_and_any_changed_byte_is_caught_typed(
    topic: str,
    body: bytes,
    props: dict[str, str],
    born: tuple[str, int],
    store: tuple[str, int],
    flip: int,
    value: int,
) -> None:
    raw = encode_record(
        topic=topic, body=body, properties=properties_to_string(props), queue_id=3,
        born_timestamp=1, born_host=born, store_timestamp=2, store_host=store,
    )  # fmt: skip
    record = decode_record(raw, check_crc=True)
    assert (record.topic, record.body, record.properties) == (topic, body, props)
    assert (record.born_host, record.store_host) == (born, store)
    raw[flip % len(raw)] = value
    try:
        changed = decode_record(raw, check_crc=True)
        _ = (changed.properties, changed.born_host, changed.store_host, changed.msg_id)
    except RemoteProtocolError:
        pass


@fuzz_settings
@given(
    st.lists(
        st.tuples(st.binary(max_size=80), st.integers(0, 2**31 - 1), st.dictionaries(
            st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "x"]), names.filter(
                lambda s: s != "" and "\x01" not in s and "\x02" not in s
            ), max_size=3,
        )),
        min_size=1, max_size=5,
    ),
    st.integers(min_value=0),
)  # fmt: skip
def test_batches_round_trip_and_truncations_fail_typed(
    entries: list[tuple[bytes, int, dict[str, str]]], cut: int
) -> None:
    raw = encode_batch(Message("T", body, flag, props) for body, flag, props in entries)
    back = decode_batch(raw, topic="T")
    assert [(bytes(m.body), m.flag, m.properties) for m in back] == entries
    try:
        shorter = decode_batch(raw[: cut % len(raw)], topic="T")
    except RemoteProtocolError:
        return
    assert len(shorter) < len(entries)  # only an entry boundary decodes


@fuzz_settings
@given(st.dictionaries(st.text(min_size=1).filter(lambda s: "\x01" not in s and "\x02" not in s),
                       st.text(min_size=1).filter(lambda s: "\x01" not in s and "\x02" not in s),
                       max_size=6),
       st.text())  # fmt: skip
def test_properties_round_trip_and_never_raise(props: dict[str, str], junk: str) -> None:
    assert string_to_properties(properties_to_string(props)) == props
    string_to_properties(junk)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | names,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=4),
    max_leaves=20,
)


@fuzz_settings
@given(json_values, st.text(max_size=60))
def test_fastjson_reads_json_and_rejects_typed(value: object, junk: str) -> None:
    assert fastjson.loads(json.dumps(value).encode()) == value
    try:
        fastjson.loads(junk)
    except RemoteProtocolError:
        pass


@fuzz_settings
@given(
    # RocketMQ's topic charset (TopicValidator): the compressed form is space-separated.
    st.dictionaries(
        st.text("%|abcXYZ019_-", min_size=1, max_size=30),
        st.tuples(st.integers(0, 64), st.integers(0, 7)),
        max_size=5,
    ),
    st.lists(names, max_size=3),
    st.booleans(),
)
def test_register_broker_body_round_trips(
    topics: dict[str, tuple[int, int]], servers: list[str], compressed: bool
) -> None:
    table = {name: TopicConfig(name, q, q, perm) for name, (q, perm) in topics.items()}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(table, DataVersion(5, 6)), servers)
    back = RegisterBrokerBody.decode(body.encode(compressed), compressed)
    assert back.filter_server_list == servers
    assert back.topic_config_serialize_wrapper.topic_config_table == table


@fuzz_settings
@given(
    st.lists(st.tuples(st.integers(-(2**40), 2**62), st.binary(max_size=64)), max_size=5),
    st.lists(st.integers(min_value=0), max_size=5),
)
def test_ha_transfer_stream_same_under_any_chunking(
    frames: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    stream = b"".join(struct.pack(">qi", offset, len(body)) + body for offset, body in frames)
    whole = TransferDecoder()
    chunked = TransferDecoder()
    points = sorted(c % (len(stream) + 1) for c in cuts)
    got_whole: list[TransferFrame] = []
    got_chunked: list[TransferFrame] = []
    with contextlib.suppress(HAProtocolError):
        got_whole += whole.feed(stream)
    for start, end in zip([0, *points], [*points, len(stream)], strict=True):
        try:
            got_chunked += chunked.feed(stream[start:end])
        except HAProtocolError:
            break
    assert got_chunked == got_whole
    if all(offset >= 0 for offset, _ in frames):
        assert [(f.master_offset, f.body) for f in got_whole] == frames
    else:
        assert whole.error is not None or len(got_whole) < len(frames)
