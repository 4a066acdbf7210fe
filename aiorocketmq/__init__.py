"""aiorocketmq: Apache RocketMQ 4.x rebuilt in Python on asyncio."""

#: The package version; pyproject.toml reads it from here (its only home).
__version__ = "0.1.0"
