"""aiorocketmq: Apache RocketMQ 4.x rebuilt in Python on asyncio."""

__version__ = "0.1.0"
