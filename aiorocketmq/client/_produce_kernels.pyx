# cython: language_level=3, boundscheck=False, wraparound=False
"""C kernels of the producer's single send, both ends of it.

Owns: ``plain_outgoing``, the compiled twin of ``Producer._check_message`` then
``_prepare`` for a usual message, and ``send_result``, the compiled twin of
``mq_client_api.py_send_result`` for the reply nearly every send gets: ``msgId``,
``queueId`` and ``queueOffset`` as text of plain ASCII digits, ``TRACE_ON`` absent or
one of Java's four spellings, an optional ``transactionId`` and ``MSG_REGION``, and
the queue the request named. Both build their object in place (its slots written at
their descriptors' offsets, as the pull decoder builds messages): no dataclass
``__init__``.

Must not: answer anything the reference would answer differently. Any other shape
returns None before changing anything, and the reference gives the answer, or the
error, with its own words.
"""

from aiorocketmq.common._slots cimport _cached_offsets, _put

from aiorocketmq.common.constants import DEFAULT_REGION, RETRY_GROUP_TOPIC_PREFIX
from aiorocketmq.common.properties import MessageConst

# SendResult's fields in the order send_result fills them.
cdef tuple _FIELDS = (
    "status", "msg_id", "offset_msg_id", "message_queue", "queue_offset",
    "transaction_id", "region_id", "trace_on",
)
_OFFSETS = {}  # class -> its _FIELDS' slot offsets
cdef str _DEFAULT_REGION = DEFAULT_REGION


cdef object _digits(object text, Py_ssize_t most):
    """The value of ``text`` when it is 1 to ``most`` ASCII digits; else None (what
    ``isdigit() and isascii()`` with the length bounds accept, then ``int``)."""
    cdef Py_ssize_t n, i
    cdef long long value = 0
    cdef Py_UCS4 c
    if type(text) is not str:
        return None
    n = len(<str>text)
    if n == 0 or n > most:
        return None
    for i in range(n):
        c = (<str>text)[i]
        if <long long>c < 48 or <long long>c > 57:  # not an ASCII digit
            return None
        value = value * 10 + (<long long>c - 48)
    return value


cdef inline bint _text_or_none(object value):
    return value is None or type(value) is str


def send_result(cls, status, msg_id, fields, sent, str topic, str broker_name):
    """``cls(status, msg_id, msgId, sent, queueOffset, transactionId, MSG_REGION or
    "DefaultRegion", TRACE_ON != "false")`` for a usual reply (its fields a ``dict``)
    whose ``queueId`` is ``sent``'s (and ``sent`` is on ``topic`` and ``broker_name``);
    None otherwise."""
    if sent is None or type(fields) is not dict:
        return None
    offset_msg_id = (<dict>fields).get("msgId")
    queue_id = _digits((<dict>fields).get("queueId"), 9)
    queue_offset = _digits((<dict>fields).get("queueOffset"), 18)
    if type(offset_msg_id) is not str or queue_id is None or queue_offset is None:
        return None
    trace = (<dict>fields).get("TRACE_ON")
    if trace is not None and trace not in ("true", "false", "1", "0"):
        return None
    transaction_id = (<dict>fields).get("transactionId")
    region = (<dict>fields).get("MSG_REGION")
    if not _text_or_none(transaction_id) or not _text_or_none(region):
        return None
    if sent.queue_id != queue_id or sent.topic != topic or sent.broker_name != broker_name:
        return None
    offsets = _cached_offsets(cls, _FIELDS, _OFFSETS)
    result = object.__new__(cls)
    _put(result, offsets[0], status)
    _put(result, offsets[1], msg_id)
    _put(result, offsets[2], offset_msg_id)
    _put(result, offsets[3], sent)
    _put(result, offsets[4], queue_offset)
    _put(result, offsets[5], transaction_id)
    _put(result, offsets[6], region if region else _DEFAULT_REGION)
    _put(result, offsets[7], trace != "false")
    return result


# _Outgoing's fields in the order plain_outgoing fills them.
cdef tuple _OUT_FIELDS = (
    "topic", "body", "sys_flag", "flag", "properties", "msg_id", "batch",
    "reconsume_times", "max_reconsume_times",
)
_OUT_OFFSETS = {}  # class -> its _OUT_FIELDS' slot offsets
cdef str _UNIQ_KEY = MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
cdef str _PREPARED = MessageConst.PROPERTY_TRANSACTION_PREPARED
cdef str _RETRY_PREFIX = RETRY_GROUP_TOPIC_PREFIX


def plain_outgoing(cls, msg, set checked_topics, Py_ssize_t max_size, Py_ssize_t compress_over,
                   next_id, to_string):
    """``cls(topic, body, 0, flag, to_string(properties), uniq, False, 0, None)`` for a
    usual message, its UNIQ_KEY set from ``next_id()`` when absent; None otherwise.

    Usual: a topic in ``checked_topics``, not a retry topic; a ``bytes``,
    ``bytearray`` or ``memoryview`` body of 1 to ``max_size`` bytes and under
    ``compress_over``; a ``dict`` of properties without a transaction flag. Nothing is
    changed before the message is known to be usual.
    """
    topic = msg.topic
    if type(topic) is not str or topic not in checked_topics:
        return None
    if (<str>topic).startswith(_RETRY_PREFIX):
        return None
    body = msg.body
    cdef Py_ssize_t size
    if type(body) is bytes or type(body) is bytearray:
        size = len(body)
    elif type(body) is memoryview:
        size = (<object>body).nbytes
    else:
        return None
    if size == 0 or size > max_size or size >= compress_over:
        return None
    properties = msg.properties
    if type(properties) is not dict or _PREPARED in <dict>properties:
        return None
    flag = msg.flag
    uniq = (<dict>properties).get(_UNIQ_KEY)
    if uniq is None:
        uniq = next_id()
        (<dict>properties)[_UNIQ_KEY] = uniq
    text = to_string(properties)
    offsets = _cached_offsets(cls, _OUT_FIELDS, _OUT_OFFSETS)
    out = object.__new__(cls)
    _put(out, offsets[0], topic)
    _put(out, offsets[1], body)
    _put(out, offsets[2], 0)
    _put(out, offsets[3], flag)
    _put(out, offsets[4], text)
    _put(out, offsets[5], uniq)
    _put(out, offsets[6], False)
    _put(out, offsets[7], 0)
    _put(out, offsets[8], None)
    return out


def v2_fields(producer_group, topic, default_topic, default_topic_queue_nums, queue_id,
              sys_flag, born_timestamp, flag, properties, reconsume_times, unit_mode, batch,
              max_reconsume_times, broker_name):
    """The compiled twin of ``mq_client_api.v2_fields``, for any arguments: the same
    keys in the same order, each value the same ``str`` of the same argument."""
    cdef dict fields = {
        "a": producer_group,
        "b": topic,
        "c": default_topic,
        "d": str(default_topic_queue_nums),
        "e": str(queue_id),
        "f": str(sys_flag),
        "g": str(born_timestamp),
        "h": str(flag),
    }
    if properties is not None:
        fields["i"] = properties
    if reconsume_times is not None:
        fields["j"] = str(reconsume_times)
    fields["k"] = "true" if unit_mode else "false"
    if max_reconsume_times is not None:
        fields["l"] = str(max_reconsume_times)
    fields["m"] = "true" if batch else "false"
    if broker_name is not None:
        fields["n"] = broker_name
    return fields
