"""Avro encodings of events and internal state."""
