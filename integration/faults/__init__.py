"""The fault suite (issue 14): scenarios that break runners, the broker and the vendor, and a
verifier that checks every event arrived exactly once. ``python -m integration.faults``."""
