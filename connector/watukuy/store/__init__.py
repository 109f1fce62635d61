"""Where partition state, snapshots, parked items and events are committed."""
