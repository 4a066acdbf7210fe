"""aiorocketmq.namesrv: the name server (L3).

Owns: the route tables and their rules (``route_info``), the KV config table and
its file (``kv_config``), the request processors (``processors``), the settings
(``config``) and the wiring (``server.NamesrvController``); ``mqnamesrv`` in
``aiorocketmq.cli.namesrv`` runs it.

Must not: import ``broker`` or ``client`` (ARCHITECTURE.md: the three L3 packages
are independent); what brokers and name servers both need (bodies, headers) lives
in ``common.route`` and ``remoting.namesrv_headers``.
"""
