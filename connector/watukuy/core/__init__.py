"""Pure logic: no I/O, no event loop, the clock passed in as ``now``."""
