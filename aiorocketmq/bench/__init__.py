"""aiorocketmq.bench: ``mqbench``, RocketMQ's benchmark producer and consumer on our client.

Owns: the load loops (``producer``, ``consumer``) and their statistics and report lines
(``stats``), in the formats of RocketMQ 4.9.8's ``example/benchmark`` tools so scripts
that read those lines read ours.

Must not: import the broker, name server or store (it is a client like any other).
"""
