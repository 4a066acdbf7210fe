"""mqadmin's ACL credentials: ``${ROCKETMQ_HOME}/conf/tools.yml``, as Java's tools read it.

The file holds ``accessKey`` and ``secretKey`` (Java's ``AclUtils.getAclRPCHook``);
when it exists with both, every request mqadmin sends is signed. A missing file or
a blank key means unsigned requests, as in Java. A file that cannot be parsed is
an error worth seeing: ``ToolsCredentialsError``.

Must not: sign anything (``remoting/acl_sign.py`` does) or read other settings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import yaml

from aiorocketmq.common.errors import RocketMQError
from aiorocketmq.remoting.acl_sign import SessionCredentials

__all__ = ["ROCKETMQ_HOME_ENV", "TOOLS_FILE", "ToolsCredentialsError", "tools_credentials"]

ROCKETMQ_HOME_ENV: Final = "ROCKETMQ_HOME"
TOOLS_FILE: Final = "conf/tools.yml"


class ToolsCredentialsError(RocketMQError):
    """``conf/tools.yml`` exists but is not a mapping of text keys."""


def tools_credentials(rocketmq_home: str | None) -> SessionCredentials | None:
    """The credentials in ``<rocketmq_home>/conf/tools.yml``, or None (unsigned).

    Raises:
        ToolsCredentialsError: the file cannot be read or parsed.
    """
    if not rocketmq_home:
        return None
    path = Path(rocketmq_home).expanduser() / TOOLS_FILE
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ToolsCredentialsError(f"{path}: {exc}") from exc
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ToolsCredentialsError(f"{path}: expected accessKey/secretKey keys")
    access_key = str(data.get("accessKey") or "").strip()
    secret_key = str(data.get("secretKey") or "").strip()
    if not access_key or not secret_key:
        return None
    return SessionCredentials(access_key, secret_key)
