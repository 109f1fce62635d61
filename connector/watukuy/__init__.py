"""watukuy: poll vendor APIs per tenant and publish what changed to Kafka."""

__version__ = "0.1.0"
