"""The control plane's Kafka topics, read whole by every instance.

- :mod:`watukuy.control.reader`: a compacted topic read from the beginning on a thread of its
  own, each record handed to the event loop (the shape of Kafka Connect's ``KafkaBasedLog``).
- :mod:`watukuy.control.configs`: ``<prefix>.configs``, connector configs and target states
  written through REST (Connect's ``KafkaConfigBackingStore``).
- :mod:`watukuy.control.keystatus`: what a key's status is, pure (no I/O).
- :mod:`watukuy.control.status`: ``<prefix>.status``, each key's last status and each
  runner's heartbeat (Connect's ``KafkaStatusBackingStore``).
"""
