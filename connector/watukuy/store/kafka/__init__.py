"""The Store on Kafka: compacted state topics, co-partitioning, transactions."""
