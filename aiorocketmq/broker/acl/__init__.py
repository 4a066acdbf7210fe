"""Plain ACL (RocketMQ 4.x ``plain_acl.yml``): accounts, white lists, signatures.

``aclEnable=true`` turns it on (off by default, as in RocketMQ). See
``plain.py`` for the file format and ``validator.py`` for what each request needs.
"""

from aiorocketmq.broker.acl.addresses import AclConfigError, parse_address_pattern
from aiorocketmq.broker.acl.plain import Account, AclAccounts, load_acl_files, parse_acl_document
from aiorocketmq.broker.acl.validator import (
    AclProcessorTable,
    AclService,
    needed_resources,
    refusal,
    resolve_acl_paths,
)

__all__ = [
    "Account",
    "AclAccounts",
    "AclConfigError",
    "AclProcessorTable",
    "AclService",
    "load_acl_files",
    "needed_resources",
    "parse_acl_document",
    "parse_address_pattern",
    "refusal",
    "resolve_acl_paths",
]
