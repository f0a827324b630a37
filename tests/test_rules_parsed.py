"""Parsed rule files kept between runs (rules/parsed.py): never stale, never trusted when damaged."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from cuda4amd.rules import parsed
from cuda4amd.rules.validate import RulesError, read_toml, shipped_rules_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@pytest.fixture()
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("CUDA4AMD_FACTS_CACHE", str(tmp_path / "facts"))
    return tmp_path / "facts" / f"rules-{parsed.FORMAT}"


@pytest.fixture()
def parses(monkeypatch) -> list[str]:
    """The texts tomllib parses from now on."""
    seen: list[str] = []
    real = tomllib.loads

    def counting(text, **kwargs):
        seen.append(text)
        return real(text, **kwargs)

    monkeypatch.setattr(tomllib, "loads", counting)
    return seen


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def test_every_shipped_rule_file_reads_back_as_tomllib_parses_it(folder, parses):
    shipped = sorted(shipped_rules_dir().rglob("*.toml"))
    assert len(shipped) > 15
    for path in shipped:
        assert read_toml(path) == tomllib.loads(path.read_text(encoding="utf-8"))  # parsed, kept
    parses.clear()
    for path in shipped:
        assert read_toml(path) == tomllib.loads(path.read_text(encoding="utf-8"))  # from the kept entry
    assert len(parses) == len(shipped)  # only the comparisons' own parses
    assert len(entries(folder)) == len(set(p.read_bytes() for p in shipped))


def test_an_edited_file_is_parsed_again(tmp_path, folder, parses):
    rule = tmp_path / "rule.toml"
    rule.write_text('name = "one"\n')
    assert read_toml(rule) == {"name": "one"}
    assert read_toml(rule) == {"name": "one"}
    assert len(parses) == 1
    rule.write_text('name = "two"\n')  # same size, same second: the digest tells them apart
    assert read_toml(rule) == {"name": "two"}
    assert len(parses) == 2
    assert len(entries(folder)) == 2


@pytest.mark.parametrize("damage", ["flip", "truncate", "seal", "not-json", "list", "empty"])
def test_a_damaged_entry_is_parsed_again_and_rewritten(tmp_path, folder, parses, damage):
    rule = tmp_path / "rule.toml"
    rule.write_text('name = "one"\nlist = [1, 2.5, true]\n')
    expected = read_toml(rule)
    (entry,) = entries(folder)
    raw = entry.read_bytes()
    seal, _, text = raw.partition(b"\n")
    if damage == "flip":
        broken = raw.replace(b"one", b"two")
    elif damage == "truncate":
        broken = raw[:-3]
    elif damage == "seal":
        broken = b"0" * 64 + b"\n" + text
    elif damage == "not-json":
        import hashlib

        broken = hashlib.sha256(b"{nope").hexdigest().encode() + b"\n{nope"
    elif damage == "list":
        import hashlib

        broken = hashlib.sha256(b"[1]").hexdigest().encode() + b"\n[1]"
    else:
        broken = b""
    entry.write_bytes(broken)
    assert read_toml(rule) == expected
    assert len(parses) == 2
    assert entry.read_bytes() == raw


def test_an_entry_that_is_no_regular_file_or_too_large_is_not_read(tmp_path, folder, parses):
    rule = tmp_path / "rule.toml"
    rule.write_text('name = "one"\n')
    read_toml(rule)
    (entry,) = entries(folder)
    entry.unlink()
    os.mkfifo(entry)  # opening it for reading must not wait for a writer
    assert read_toml(rule) == {"name": "one"}
    entry.unlink()
    entry.write_bytes(b"x" * (len(rule.read_bytes()) * parsed.GROWTH + parsed.SLACK + 1))
    assert read_toml(rule) == {"name": "one"}
    assert len(parses) == 3
    assert entry.read_bytes().endswith(b'{"name":"one"}')  # the oversized one was replaced


def test_a_cache_folder_that_cannot_be_written_only_costs_the_parse(tmp_path, monkeypatch, parses):
    blocker = tmp_path / "facts"
    blocker.write_text("a file where the folder would be")
    monkeypatch.setenv("CUDA4AMD_FACTS_CACHE", str(blocker))
    rule = tmp_path / "rule.toml"
    rule.write_text('name = "one"\n')
    assert read_toml(rule) == {"name": "one"}
    assert read_toml(rule) == {"name": "one"}
    assert len(parses) == 2
    assert blocker.read_text() == "a file where the folder would be"


def test_a_document_with_a_date_is_read_but_not_kept(tmp_path, folder, parses):
    import datetime

    rule = tmp_path / "rule.toml"
    rule.write_text("when = 2026-12-01\n")
    assert read_toml(rule) == {"when": datetime.date(2026, 12, 1)}
    assert read_toml(rule) == {"when": datetime.date(2026, 12, 1)}
    assert len(parses) == 2
    assert entries(folder) == []


def test_bad_toml_is_a_rules_error_and_nothing_is_kept(tmp_path, folder):
    rule = tmp_path / "rule.toml"
    rule.write_bytes(b'name = "\xff"\n')
    with pytest.raises(RulesError, match="not UTF-8 at byte 8"):
        read_toml(rule)
    rule.write_text("name = \n")
    with pytest.raises(RulesError, match="not valid TOML"):
        read_toml(rule)
    assert entries(folder) == []
