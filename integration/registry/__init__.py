"""The project's own Confluent-compatible schema registry, Apicurio Registry (see apicurio.py)."""

from integration.registry.apicurio import (
    RunningRegistry,
    read_running,
    start,
    stop,
)

__all__ = ["RunningRegistry", "read_running", "start", "stop"]
