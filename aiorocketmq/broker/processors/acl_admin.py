"""The ACL's admin requests (RocketMQ 4.9.8's AdminBrokerProcessor):

* UPDATE_AND_CREATE_ACL_CONFIG (50): create or update an account (``accessKey``,
  ``secretKey``, ``whiteRemoteAddress``, ``admin``, ``defaultTopicPerm``,
  ``defaultGroupPerm``, ``topicPerms`` and ``groupPerms`` as ``,``-separated lists);
  UPDATE_AND_CREATE_ACL_CONFIG_FAILED (209) with the reason otherwise.
* DELETE_ACL_CONFIG (51): remove an account; DELETE_ACL_CONFIG_FAILED (210).
* GET_BROKER_CLUSTER_ACL_INFO (52): the files' data versions in the reply's fields
  (``version``: the default file's, ``allAclFileVersion``: every file's, as JSON),
  with the broker's cluster, name and address.
* UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): replace ``globalWhiteRemoteAddresses`` of
  ``aclFileFullPath`` (one of the broker's ACL files; default ``aclPlainFile``);
  UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED (211).

Edits are written to the files and in force at once. With ``aclEnable=false`` every
one is SYSTEM_ERROR ``The broker does not enable acl`` (Java fails on a null there).
With ACL on, 50, 51 and 53 need an admin account (``plain.ADMIN_CODES``).

Must not: edit files itself (``AclService`` does, through ``acl.editor``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiorocketmq.broker.acl import AclConfigError, AclService
from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.headers import ext_bool, ext_str

__all__ = ["AclAdminProcessor"]

log = logging.getLogger(__name__)


def _split(text: str | None) -> list[str] | None:
    """``UtilAll.split(s, ",")``: None stays None (the field is not updated)."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def _not_enabled(_conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    return request.response_to(ResponseCode.SYSTEM_ERROR, "The broker does not enable acl")


class AclAdminProcessor:
    """Codes 50-53 (see the module docstring).

    Args:
        ctx: the broker (name, cluster, address for code 52).
        acl: the ACL service, None when ``aclEnable`` is false.
    """

    def __init__(self, ctx: BrokerContext, acl: AclService | None) -> None:
        self._ctx = ctx
        self._acl_or_none = acl

    @property
    def _acl(self) -> AclService:
        assert self._acl_or_none is not None  # registered only with ACL on
        return self._acl_or_none

    def register(self, table: ProcessorTable) -> None:
        """Route codes 50-53 here (to one refusal when ACL is off)."""
        handlers = {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_access_config,
            RequestCode.DELETE_ACL_CONFIG: self.delete_access_config,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.get_acl_config_version,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white,
        }
        for code, handler in handlers.items():
            table.register(code, handler if self._acl_or_none is not None else _not_enabled)

    async def update_access_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """Create or update one account."""
        f = request.ext_fields
        access_key = ext_str(f, "accessKey")
        fields: dict[str, Any] = {
            "accessKey": access_key,
            "secretKey": f.get("secretKey") or None,
            "whiteRemoteAddress": f.get("whiteRemoteAddress"),
            "admin": ext_bool(f, "admin", False),
            "defaultTopicPerm": f.get("defaultTopicPerm") or None,
            "defaultGroupPerm": f.get("defaultGroupPerm") or None,
            "topicPerms": _split(f.get("topicPerms")),
            "groupPerms": _split(f.get("groupPerms")),
        }
        try:
            await self._acl.update_account(fields)
        except AclConfigError as exc:
            log.warning("acl update of %s refused: %s", access_key, exc)
            return request.response_to(ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED, str(exc))
        log.info("acl account %s updated by %s", access_key, conn.remote_address)
        return request.response_to(ResponseCode.SUCCESS)

    async def delete_access_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """Remove one account."""
        access_key = ext_str(request.ext_fields, "accessKey")
        try:
            deleted = await self._acl.delete_account(access_key)
        except AclConfigError as exc:
            return request.response_to(ResponseCode.DELETE_ACL_CONFIG_FAILED, str(exc))
        if not deleted:
            return request.response_to(
                ResponseCode.DELETE_ACL_CONFIG_FAILED,
                f"The accesskey[{access_key}] corresponding to accessConfig has been deleted "
                "failed.",
            )
        log.info("acl account %s deleted by %s", access_key, conn.remote_address)
        return request.response_to(ResponseCode.SUCCESS)

    async def get_acl_config_version(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """The ACL files' data versions, in the reply's fields."""
        versions = await self._acl.versions()
        cfg = self._ctx.config
        host, port = self._ctx.store_host
        default = versions.get(str(self._acl.default_file), {"counter": 0, "timestamp": 0})
        fields = {
            "version": json.dumps(default, separators=(",", ":")),
            "allAclFileVersion": json.dumps(versions, separators=(",", ":")),
            "brokerName": cfg.broker_name,
            "brokerAddr": f"{host}:{port}",
            "clusterName": cfg.broker_cluster_name,
        }
        return request.response_to(ResponseCode.SUCCESS, None, fields)

    async def update_global_white(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """Replace a file's global white list."""
        f = request.ext_fields
        addresses = _split(f.get("globalWhiteAddrs")) or []
        try:
            await self._acl.update_global_white(addresses, f.get("aclFileFullPath") or None)
        except AclConfigError as exc:
            return request.response_to(
                ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, str(exc)
            )
        log.info("acl global white list set to %s by %s", addresses, conn.remote_address)
        return request.response_to(ResponseCode.SUCCESS)
