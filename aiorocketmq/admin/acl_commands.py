"""mqadmin's ACL commands, as RocketMQ 4.9.8's ``tools/command/acl``: updateAclConfig,
deleteAclConfig, updateGlobalWhiteAddr and clusterAclConfigVersion.

Each goes to ``-b`` one broker or ``-c`` every broker of a cluster, masters and slaves
(Java's ``fetchMasterAndSlaveAddrByClusterName``), and prints Java's lines; with
``--json`` one document: ``{"updated"|"deleted": [addresses], ...}`` for the edits,
``[{"clusterName", "brokerName", "brokerAddr", "aclFilePath", "counter",
"timestamp"}]`` for clusterAclConfigVersion. A broker's refusal stops the command
(exit 1) with its code and reason, where Java prints a stack trace.

Must not: parse the command line (``aiorocketmq.cli.admin``).
"""

from __future__ import annotations

import json
import time
from argparse import Namespace
from typing import Any, Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQBrokerError
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.headers import to_ext_fields

__all__ = ["ACL_COMMANDS"]

_VERSION_ROW: Final = "%-16s  %-22s  %-22s  %-20s  %-22s  %-22s\n"


async def _addresses(admin: MQAdmin, args: Namespace) -> list[str]:
    if args.brokerAddr:
        return [args.brokerAddr.strip()]
    if args.clusterName:
        return await admin.master_and_slave_addrs(args.clusterName.strip())
    raise UsageError("one of -b brokerAddr or -c clusterName is required")


async def _call(admin: MQAdmin, address: str, code: int, fields: dict[str, str]) -> RemotingCommand:
    reply = await admin.broker.invoke(address, code, fields)
    if reply.code != ResponseCode.SUCCESS:
        raise MQBrokerError(reply.code, reply.remark, address=address)
    return reply


async def _each(
    admin: MQAdmin, args: Namespace, write: Write, code: int, *, fields: dict[str, str], line: str
) -> list[str]:
    """Send the edit to every target in turn (the first refusal stops); the addresses.
    Without ``--json`` each success prints ``line`` with ``%s`` as the address."""
    done = []
    for address in await _addresses(admin, args):
        await _call(admin, address, code, fields)
        done.append(address)
        if not jr.wants_json(args):
            write(line % address)
    return done


async def update_acl_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateAclConfig -b|-c -a accessKey [-s -w -i -u -t -g -m]``."""
    fields = to_ext_fields(
        accessKey=args.accessKey.strip(),
        secretKey=args.secretKey,
        whiteRemoteAddress=args.whiteRemoteAddress,
        defaultTopicPerm=args.defaultTopicPerm,
        defaultGroupPerm=args.defaultGroupPerm,
        topicPerms=args.topicPerms,
        groupPerms=args.groupPerms,
        admin=None if args.admin is None else args.admin.strip().lower() == "true",
    )
    done = await _each(
        admin, args, write, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields=fields,
        line="create or update plain access config to %s success.\n",
    )  # fmt: skip
    if jr.wants_json(args):
        write(jr.dump({"accessKey": fields["accessKey"], "updated": done}))


async def delete_acl_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``deleteAclConfig -b|-c -a accessKey``."""
    access_key = args.accessKey.strip()
    line = "delete plain access config account from %s success.\n"
    done = await _each(
        admin, args, write, RequestCode.DELETE_ACL_CONFIG, fields={"accessKey": access_key},
        line=line + "account's accesskey is:" + access_key.replace("%", "%%") + "\n",
    )  # fmt: skip
    if jr.wants_json(args):
        write(jr.dump({"accessKey": access_key, "deleted": done}))


async def update_global_white_addr(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateGlobalWhiteAddr -b|-c -g addresses [-p aclFileFullPath]``."""
    fields = to_ext_fields(
        globalWhiteAddrs=args.globalWhiteRemoteAddresses.strip(),
        aclFileFullPath=args.aclFileFullPath,
    )
    done = await _each(
        admin, args, write, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, fields=fields,
        line="update global white remote addresses to %s success.\n",
    )  # fmt: skip
    if jr.wants_json(args):
        write(jr.dump({"globalWhiteAddrs": fields["globalWhiteAddrs"], "updated": done}))


async def cluster_acl_config_version(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``clusterAclConfigVersion -b|-c``: each ACL file's version on each broker."""
    rows: list[dict[str, Any]] = []
    for address in await _addresses(admin, args):
        f = (await _call(admin, address, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {})).ext_fields
        try:
            versions = json.loads(f.get("allAclFileVersion") or "{}")
        except ValueError as exc:
            raise MQBrokerError(
                ResponseCode.SYSTEM_ERROR, f"malformed allAclFileVersion: {exc}", address=address
            ) from exc
        for path, version in sorted(versions.items()):
            rows.append({
                "clusterName": f.get("clusterName"), "brokerName": f.get("brokerName"),
                "brokerAddr": f.get("brokerAddr") or address, "aclFilePath": path,
                "counter": int(version.get("counter", 0)),
                "timestamp": int(version.get("timestamp", 0)),
            })  # fmt: skip
    if jr.wants_json(args):
        write(jr.dump(rows))
        return
    write(_VERSION_ROW % ("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath",
                          "#AclConfigVersionNum", "#AclLastUpdateTime"))  # fmt: skip
    for r in rows:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["timestamp"] / 1000))
        write(_VERSION_ROW % (r["clusterName"], r["brokerName"], r["brokerAddr"],
                              r["aclFilePath"], r["counter"], stamp))  # fmt: skip


ACL_COMMANDS: Final[dict[str, Command]] = {
    "updateAclConfig": update_acl_config,
    "deleteAclConfig": delete_acl_config,
    "updateGlobalWhiteAddr": update_global_white_addr,
    "clusterAclConfigVersion": cluster_acl_config_version,
}
"""mqadmin command name -> coroutine."""
