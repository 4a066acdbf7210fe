"""aiorocketmq.admin: the admin library mqadmin is built on.

Owns: ``mq_admin.MQAdmin`` (the typed async facade: topics, groups, cluster and
runtime info, stats, connections), ``broker_api.BrokerAdminAPI`` (the broker admin
requests), ``commands`` (what each mqadmin command does and prints), ``render``
(RocketMQ 4.9.8's output formats, pure), and for messages and offsets
``message_admin.MessageAdmin`` (queries by key / id / unique key, pulls, message
tracks, offset resets), ``message_commands`` and ``message_render``.

Must not: parse command lines or touch ``sys`` (``cli/admin.py`` does), or import
``broker`` / ``namesrv`` (it talks to them over the wire, through ``client``).
"""
