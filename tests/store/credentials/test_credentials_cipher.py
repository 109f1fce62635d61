"""The grant cipher: the keys a user may write, and what a reader can and cannot open."""

from __future__ import annotations

import base64
import os

import pytest

from watukuy.core.errors import ConfigError
from watukuy.store.credentials.cipher import (
    Cipher,
    Undecryptable,
    key_id,
    parse_key,
    parse_keys,
)

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))


@pytest.mark.parametrize(
    "text",
    [
        base64.b64encode(KEY).decode(),  # standard, padded
        base64.b64encode(KEY).decode().rstrip("="),
        base64.urlsafe_b64encode(KEY).decode(),
        base64.urlsafe_b64encode(KEY).decode().rstrip("="),
        KEY.hex(),
        KEY.hex().upper(),
        f"  {KEY.hex()}\n",  # a key file's trailing newline
    ],
)
def test_a_key_is_read_in_every_written_form(text: str) -> None:
    assert parse_key(text, "credentials.key") == KEY


def test_url_safe_characters_are_read_as_such() -> None:
    key = b"\xfb\xff" * 16  # encodes to '+' and '/' in standard base64
    assert parse_key(base64.urlsafe_b64encode(key).decode(), "credentials.key") == key
    assert parse_key(base64.b64encode(key).decode(), "credentials.key") == key


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        (base64.b64encode(bytes(16)).decode(), "this is 16 bytes"),
        ("not a key at all!", "must be 32 bytes"),
        ("0" * 63, "must be 32 bytes"),
        ("", "is empty"),
        (12345, "not int"),
    ],
)
def test_a_bad_key_names_its_setting_never_its_value(text: object, detail: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_key(text, "credentials.keys[1]")
    message = str(caught.value)
    assert caught.value.path == "credentials.keys[1]"
    assert detail in message
    if isinstance(text, str) and text:
        assert text not in message


def test_key_or_keys_exactly_one() -> None:
    written = KEY.hex()
    assert parse_keys(written, None) == [KEY]
    assert parse_keys(None, [written, OTHER.hex()]) == [KEY, OTHER]
    with pytest.raises(ConfigError, match=r"^credentials: give key or keys, not both"):
        parse_keys(written, [written])
    with pytest.raises(ConfigError, match=r"^credentials\.key: is required"):
        parse_keys(None, None)
    with pytest.raises(ConfigError, match=r"^credentials\.keys: must be a list"):
        parse_keys(None, [])
    with pytest.raises(ConfigError, match=r"^credentials\.keys\[1\]: is the same key as") as e:
        parse_keys(None, [written, base64.b64encode(KEY).decode()])
    assert written not in str(e.value)


def test_round_trip_bound_to_the_record_key() -> None:
    cipher = Cipher([KEY])
    kid, value = cipher.encrypt(b'{"refresh_token": "r-1"}', b"grant/c/t")
    assert kid == key_id(KEY) and len(kid) == 16
    assert b"r-1" not in value
    assert cipher.decrypt(kid, value, b"grant/c/t") == b'{"refresh_token": "r-1"}'
    # Another tenant's record key: the value does not open there.
    with pytest.raises(Undecryptable, match="fails authentication"):
        cipher.decrypt(kid, value, b"grant/c/other")


def test_each_value_has_its_own_nonce() -> None:
    cipher = Cipher([KEY])
    assert cipher.encrypt(b"same", b"k")[1] != cipher.encrypt(b"same", b"k")[1]


def test_rotation_writes_with_the_first_and_reads_with_any() -> None:
    old_kid, old_value = Cipher([OTHER]).encrypt(b"old", b"k")
    rotated = Cipher([KEY, OTHER])
    assert rotated.decrypt(old_kid, old_value, b"k") == b"old"
    kid, _ = rotated.encrypt(b"new", b"k")
    assert kid == key_id(KEY) != old_kid


def test_unknown_key_and_tampering_say_why_with_the_key_id_only() -> None:
    kid, value = Cipher([OTHER]).encrypt(b"secret", b"k")
    with pytest.raises(Undecryptable, match=f"key not given here \\(key id {kid}\\)"):
        Cipher([KEY]).decrypt(kid, value, b"k")
    tampered = value[:-1] + bytes([value[-1] ^ 1])
    with pytest.raises(Undecryptable, match="fails authentication"):
        Cipher([OTHER]).decrypt(kid, tampered, b"k")
    with pytest.raises(Undecryptable, match="not an encrypted grant"):
        Cipher([OTHER]).decrypt(kid, b"\x02" + value[1:], b"k")


def test_repr_shows_key_ids_only() -> None:
    key = os.urandom(32)
    shown = repr(Cipher([key]))
    assert key_id(key) in shown
    assert key.hex() not in shown and base64.b64encode(key).decode() not in shown
