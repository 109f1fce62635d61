"""The Kafka Connect-style REST API."""
