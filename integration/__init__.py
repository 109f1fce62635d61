"""Test and demo harnesses that run outside the connector package: the vendor simulator, the
Kafka broker helpers, fault and benchmark scenarios."""
