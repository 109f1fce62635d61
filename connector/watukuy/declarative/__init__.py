"""Declarative HTTP pollers: a vendor API described as data (see the contract)."""
