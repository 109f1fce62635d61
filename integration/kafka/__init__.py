"""The project's own single-node Apache Kafka broker (see broker.py)."""
