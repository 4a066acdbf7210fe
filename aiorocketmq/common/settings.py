"""Loading pydantic settings models from RocketMQ ``.properties`` values.

Owns: ``ConfigError`` and the two steps every component's loader shares: which
keys a model accepts (its snake_case names and RocketMQ's camelCase aliases), and
validating a mapping into a model with an error that names the offending keys.

Must not: read files or the environment (the CLI does), or know any component.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from aiorocketmq.common.errors import RocketMQError

__all__ = ["ConfigError", "model_keys", "validate_settings"]

M = TypeVar("M", bound=BaseModel)


class ConfigError(RocketMQError):
    """A setting has a value its type cannot take; the message names the key."""


def model_keys(model: type[BaseModel]) -> frozenset[str]:
    """Every key ``model`` accepts: field names and their (RocketMQ) aliases."""
    names = set(model.model_fields)
    names.update(f.alias for f in model.model_fields.values() if f.alias)
    return frozenset(names)


def validate_settings(model: type[M], values: Mapping[str, Any]) -> M:
    """``model`` from ``values``.

    Raises:
        ConfigError: naming every key whose value does not fit, with the value.
    """
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}={err.get('input')!r}: {err['msg']}"
            for err in exc.errors()
        )
        raise ConfigError(f"bad setting: {problems}") from None
