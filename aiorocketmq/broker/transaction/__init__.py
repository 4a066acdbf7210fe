"""RocketMQ 4.x transactional messages: half messages, op messages, the check back.

Owns: ``half_service`` (storing a prepared message into ``RMQ_SYS_TRANS_HALF_TOPIC``,
finding it again, op messages, the system group's offsets) and ``check_service``
(the periodic check of unanswered half messages and CHECK_TRANSACTION_STATE).

Must not: register request codes (``processors/end_transaction.py`` and
``processors/send.py`` do) or start anything itself (the controller does).
"""
