"""QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33).

Owns: RocketMQ 4.9.8's ``QueryMessageProcessor``:

* QUERY_MESSAGE: the stored records whose ``KEYS`` word or ``UNIQ_KEY`` hashes
  like ``topic#key`` in ``[beginTimestamp, endTimestamp]``, through the store's
  IndexFiles. With the extField ``_UNIQUE_KEY_QUERY: "true"`` (the admin's
  query by unique key) ``maxNum`` is replaced by the store's
  ``defaultQueryMaxNum``. The reply carries ``indexLastUpdateTimestamp`` /
  ``indexLastUpdatePhyoffset`` either way; SUCCESS with the records back to back
  as the body, or QUERY_NOT_FOUND "can not find message, maybe time range not
  correct". Hash collisions are returned as Java returns them: the client checks
  the real key.
* VIEW_MESSAGE_BY_ID: the one stored record at ``offset`` (the CommitLog offset
  the client decoded from an offsetMsgId), or SYSTEM_ERROR "can not find message
  by the offset, <offset>".

Must not: decode or filter records (the body is the stored bytes), or keep a held
record past the reply.
"""

from __future__ import annotations

import logging
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.remoting.broker_admin_headers import (
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    ViewMessageRequestHeader,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection

__all__ = ["UNIQUE_MSG_QUERY_FLAG", "QueryProcessor"]

log = logging.getLogger(__name__)

UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"
"""extField of a query by unique key (``MixAll.UNIQUE_MSG_QUERY_FLAG``)."""


class QueryProcessor:
    """Handles QUERY_MESSAGE and VIEW_MESSAGE_BY_ID for one broker.

    Args:
        ctx: the broker's parts (the store and its config are used).
    """

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx

    def register(self, table: ProcessorTable) -> None:
        """Register QUERY_MESSAGE and VIEW_MESSAGE_BY_ID."""
        table.register(RequestCode.QUERY_MESSAGE, self.query_message)
        table.register(RequestCode.VIEW_MESSAGE_BY_ID, self.view_message_by_id)

    async def query_message(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_MESSAGE -> the matching records (a bad header raises ``HeaderFieldError``).

        An operator's search of old messages: the records the index names that left
        memory are read in a thread first (``store/read_ahead.py``), not on the loop.
        """
        header = QueryMessageRequestHeader.from_ext_fields(request.ext_fields)
        max_num = header.max_num
        if request.ext_fields.get(UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = self._ctx.store_config.default_query_max_num
        store = self._ctx.store
        window = (header.topic, header.key, max_num, header.begin_timestamp, header.end_timestamp)
        found = None
        if store.running:  # the lookup once: its records read ahead, then answered
            found = store.index_service.query_offset(*window)
            pending = store.read_ahead.fault_in_records(found.phy_offsets)
            if pending is not None:
                await pending
        result = store.query_message(*window, found)
        with result:
            fields = QueryMessageResponseHeader(
                index_last_update_timestamp=result.index_last_update_timestamp,
                index_last_update_phyoffset=result.index_last_update_phyoffset,
            ).to_ext_fields()
            if result.buffer_total_size <= 0:
                return request.response_to(
                    ResponseCode.QUERY_NOT_FOUND,
                    "can not find message, maybe time range not correct",
                    fields,
                )
            # A copy for now: the zero-copy reply path of PULL_MESSAGE applies here too.
            body = result.body()
        return request.response_to(ResponseCode.SUCCESS, None, fields, body)

    async def view_message_by_id(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID -> the record at ``offset`` (a bad header raises).

        An operator's look at an old message: a record that left memory is read in a
        thread first (``store/read_ahead.py``), not on the loop.
        """
        header = ViewMessageRequestHeader.from_ext_fields(request.ext_fields)
        if header.offset >= 0:
            pending = self._ctx.store.read_ahead.fault_in_record(header.offset)
            if pending is not None:
                await pending
        selected = (
            self._ctx.store.select_one_message_by_offset(header.offset)
            if header.offset >= 0
            else None
        )
        if selected is None:
            return request.response_to(
                ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {header.offset}"
            )
        with selected:
            # A copy for now: the zero-copy reply path of PULL_MESSAGE applies here too.
            body = bytes(selected.view)
        return request.response_to(ResponseCode.SUCCESS, None, None, body)
