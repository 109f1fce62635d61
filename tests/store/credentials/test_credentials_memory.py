"""The credential store contract on the memory store."""

from __future__ import annotations

import pytest

from tests.store.credentials.contract import CredentialContract, Opener
from watukuy.store.credentials import CredentialStore
from watukuy.store.credentials.memory import MemoryCredentials


class TestMemoryCredentials(CredentialContract):
    restarts = False

    @pytest.fixture
    def opener(self) -> Opener:
        store = MemoryCredentials()

        async def opened() -> CredentialStore:
            await store.start()
            return store

        return opened
