"""The shipped rule files are parsed once per install (rules/toml_cache.py), safely."""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
from pathlib import Path

import pytest

from cuda4amd.rules.toml_cache import cached_document
from cuda4amd.rules.validate import read_toml, shipped_rules_dir

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

RELEASE = shipped_rules_dir() / "zluda" / "v6.toml"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CUDA4AMD_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "rules"


def parsed(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_a_shipped_file_is_kept_and_read_back_the_same(cache):
    assert read_toml(RELEASE) == parsed(RELEASE)
    entries = list(cache.iterdir())
    assert len(entries) == 1 and entries[0].stat().st_mode & 0o777 == 0o600
    assert cache.stat().st_mode & 0o777 == 0o700
    calls = []
    assert cached_document(RELEASE, RELEASE.read_bytes(), lambda raw: calls.append(raw) or {}) == parsed(RELEASE)
    assert calls == []  # from the entry, not parsed


def test_a_users_rules_file_is_parsed_every_time(cache, tmp_path):
    own = tmp_path / "own.toml"
    own.write_text('a = 1\n', encoding="utf-8")
    assert read_toml(own) == {"a": 1}
    assert not cache.exists() or not list(cache.iterdir())


@pytest.mark.parametrize("damage", ["flipped", "foreign-pickle", "not-a-dict", "empty"])
def test_a_damaged_or_foreign_entry_is_parsed_again(cache, damage):
    read_toml(RELEASE)
    entry = next(cache.iterdir())
    body = entry.read_bytes()
    if damage == "flipped":
        body = body[:-1] + bytes([body[-1] ^ 1])
    elif damage in ("foreign-pickle", "not-a-dict"):
        # with a valid digest: only the unpickler stands between it and the scan
        payload = pickle.dumps(os.system if damage == "foreign-pickle" else [1, 2])
        body = hashlib.sha256(payload).digest() + payload
    else:
        body = b""
    entry.write_bytes(body)
    entry.chmod(0o600)
    assert read_toml(RELEASE) == parsed(RELEASE)


@pytest.mark.skipif(os.name == "nt", reason="POSIX modes")
def test_a_cache_folder_others_can_write_is_not_used(cache, capfd):
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    assert read_toml(RELEASE) == parsed(RELEASE)
    assert list(cache.iterdir()) == []
    assert "not using" in capfd.readouterr().err
