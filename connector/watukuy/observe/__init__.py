"""Observers of the engine and the stores (the protocol lives in ``watukuy.core.observe``)."""
