"""Every exception the client raises is importable from ``aiorocketmq.client``.

A user catching what the README names (``MQTimeoutError``, ``MQSendRequestError``...)
imports it from the package they use; the timeout error is also a ``TimeoutError``
and the argument error a ``ValueError``, so plain Python handlers catch them.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import aiorocketmq.client as client
from aiorocketmq.client import errors
from aiorocketmq.common import errors as common_errors

README = Path(__file__).resolve().parents[3] / "README.md"


def _exception_classes(module: object) -> set[str]:
    return {
        name
        for name, value in vars(module).items()
        if inspect.isclass(value)
        and issubclass(value, BaseException)
        and value.__module__ == getattr(module, "__name__", "")
    }


def test_every_client_and_common_exception_is_exported() -> None:
    names = _exception_classes(errors) | _exception_classes(common_errors)
    assert names, "no exception classes found"
    missing = {n for n in names if n not in client.__all__ or not hasattr(client, n)}
    assert not missing


def test_every_exception_the_readme_names_for_clients_is_exported() -> None:
    text = README.read_text("utf-8").split("## Internals", 1)[0]
    named = set(re.findall(r"`(\w+Error)`", text))
    ours = _exception_classes(errors) | _exception_classes(common_errors)
    # Names of the remoting layer appear only beside the client's own name.
    remoting = {n for n in named if n.startswith("Remoting")}
    assert named - remoting <= ours | {"ValueError", "TimeoutError"}, named - remoting - ours
    assert named - remoting - {"ValueError", "TimeoutError"} <= set(client.__all__)


def test_timeout_and_argument_errors_are_builtin_kinds_too() -> None:
    timeout = client.MQTimeoutError("no reply in 3000 ms", address="127.0.0.1:10911")
    assert isinstance(timeout, TimeoutError) and isinstance(timeout, client.MQRemotingError)
    assert timeout.retriable and timeout.address == "127.0.0.1:10911"
    assert str(timeout) == "no reply in 3000 ms"
    assert issubclass(client.InvalidArgumentError, ValueError)
    assert issubclass(client.MQClientError, client.RocketMQError)
