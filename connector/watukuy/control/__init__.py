"""The control plane: the control topics, read whole by every instance, and what REST asks of
a runner.

- :mod:`watukuy.control.reader`: a compacted topic read from the beginning on a thread of its
  own, each record handed to the event loop (the shape of Kafka Connect's ``KafkaBasedLog``).
- :mod:`watukuy.control.configs`: ``<prefix>.configs``, connector configs and target states
  written through REST (Connect's ``KafkaConfigBackingStore``); :mod:`~watukuy.control.applier`
  applies them to this instance's engine.
- :mod:`watukuy.control.keystatus`: what a key's status is, pure (no I/O).
- :mod:`watukuy.control.status`: ``<prefix>.status``, each key's last status and each
  runner's heartbeat (Connect's ``KafkaStatusBackingStore``).
- :mod:`watukuy.control.service`: :class:`~watukuy.control.service.RunnerControl`, REST's
  ``Control``, made of one collaborator per concern: :mod:`~watukuy.control.connectors`
  (configs, targets), :mod:`~watukuy.control.tasks` (status, partitions, restart),
  :mod:`~watukuy.control.offsets` (offsets, parked items, over :mod:`~watukuy.control.stored`),
  :mod:`~watukuy.control.keyops` (one key's operations), :mod:`~watukuy.control.health`.
"""
