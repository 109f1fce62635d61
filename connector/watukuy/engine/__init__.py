"""The asyncio runtime: ticks, the daemon loop, per-partition operations."""
