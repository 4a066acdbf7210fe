"""aiorocketmq.remoting."""
