"""The read stage across processes and through the facts cache: never a different report.

Every case is scanned by the CLI with `--jobs 1 --no-cache` (one process, no
cache) and compared byte for byte with worker processes, with a cold and a
warm cache, and with caches that were damaged or tampered with.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile

import pytest
from click.testing import CliRunner
from conftest import FIXTURES

from cuda4amd.cli import main
from cuda4amd.scan.read import cache as facts
from cuda4amd.scan.workers import usable_cores
from cuda4amd.userdirs import SEAL_BYTES

CASES = {
    "demo-tool": FIXTURES / "demo" / "Tool",
    "pe": FIXTURES / "pe",
    "elf": FIXTURES / "elf",
    "byname": FIXTURES / "byname",
    "kernels": FIXTURES / "kernels",
    "corrupt": FIXTURES / "corrupt",
    "drivernames": FIXTURES / "drivernames",  # driver functions named at run time, in the facts too
    "one-binary": FIXTURES / "demo" / "Tool" / "tool.exe",  # its folder walked, what it loads read
    "all-fixtures": FIXTURES,
}


def scan_json(target, *options: str, cache_dir=None) -> str:
    env = {"CUDA4AMD_FACTS_CACHE": str(cache_dir)} if cache_dir is not None else {}
    result = CliRunner(env=env).invoke(main, ["scan", str(target), "--format", "json", "--host", "none", *options])
    assert result.exit_code in (0, 3, 4, 9), result.output
    assert result.output.startswith("{")
    document = json.loads(result.output)
    # the command line as typed (--jobs, --no-cache) is the one field that differs by design
    assert document.pop("command").startswith("cuda4amd scan ")
    return json.dumps(document, indent=2)


def entries(cache_dir) -> list:
    """The facts entries in ``cache_dir``, one file per binary."""
    return sorted(cache_dir.glob("*" + facts.SUFFIX))


@pytest.mark.parametrize("case", sorted(CASES))
def test_workers_and_cache_give_the_one_process_report(case, tmp_path):
    target = CASES[case]
    serial = scan_json(target, "--jobs", "1", "--no-cache")
    assert scan_json(target, "--jobs", "2", "--no-cache") == serial
    assert scan_json(target, "--jobs", "3", "--no-cache") == serial
    cold = scan_json(target, "--jobs", "2", cache_dir=tmp_path / "facts")
    warm = scan_json(target, "--jobs", "1", cache_dir=tmp_path / "facts")
    warm_parallel = scan_json(target, "--jobs", "2", cache_dir=tmp_path / "facts")
    assert cold == warm == warm_parallel == serial
    if json.loads(serial)["binaries"]:
        assert entries(tmp_path / "facts"), "the cache was filled"


def test_an_archive_read_by_workers_matches_one_process(tmp_path):
    archive = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for folder in ("pe", "elf", "byname", "corrupt"):
            for path in sorted((FIXTURES / folder).iterdir()):
                if path.is_file():
                    zf.write(path, f"pkg/{folder}/{path.name}")
    serial = scan_json(archive, "--jobs", "1", "--no-cache")
    assert scan_json(archive, "--jobs", "2", "--no-cache") == serial
    assert scan_json(archive, "--jobs", "2", cache_dir=tmp_path / "c") == serial
    assert scan_json(archive, "--jobs", "1", cache_dir=tmp_path / "c") == serial


def test_library_default_reads_in_process_for_small_trees(scan):
    # jobs=None: one worker per usable core, only when there is enough to read
    assert scan(CASES["pe"], jobs=None) == scan(CASES["pe"], jobs=1)
    assert usable_cores() >= 1


def tamper(cache_dir, change) -> None:
    """Each entry's bytes replaced by ``change(key, entry bytes)`` (the file stays the user's, mode 0600)."""
    found = entries(cache_dir)
    assert found
    for entry in found:
        entry.write_bytes(change(entry.name[:-len(facts.SUFFIX)], entry.read_bytes()))


def sealed(body: bytes) -> bytes:
    """``body`` as an entry: its SHA-256, then it."""
    import hashlib

    return hashlib.sha256(body).digest() + body


def record_of(entry: bytes) -> tuple:
    import pickle

    return pickle.loads(entry[SEAL_BYTES:])  # the test's own cache


def changed_record(change):
    """A tamper() change that rewrites the record and digests it again: only the record's checks stand in the way."""
    import pickle

    def apply(key, entry):
        return sealed(pickle.dumps(change(record_of(entry)), protocol=5))
    return apply


class Forged:
    """What a forged pickle would do when loaded: run a command (here, make the file ``proof``)."""

    def __init__(self, proof) -> None:
        self.proof = proof

    def __reduce__(self):
        return (os.system, (f"touch '{self.proof}'",))


@pytest.mark.parametrize("damage", ["flipped-byte", "truncated", "empty", "other-key", "extra-field",
                                    "info-not-a-binary", "not-pickle", "foreign-class", "garbage"])
def test_a_damaged_cache_changes_nothing(damage, tmp_path, rules):
    import pickle

    target = tmp_path / "tree"
    shutil.copytree(FIXTURES / "demo" / "Tool", target)
    cache_dir = tmp_path / "facts"
    serial = scan_json(target, "--jobs", "1", "--no-cache")
    assert scan_json(target, cache_dir=cache_dir) == serial
    assert cache_hits(target, cache_dir, rules) == len(entries(cache_dir)) > 0
    if damage == "flipped-byte":
        tamper(cache_dir, lambda k, e: e[:40] + bytes([e[40] ^ 1]) + e[41:])
    elif damage == "truncated":
        tamper(cache_dir, lambda k, e: e[:-1])
    elif damage == "empty":
        tamper(cache_dir, lambda k, e: b"")
    elif damage == "other-key":
        found = entries(cache_dir)
        contents = [e.read_bytes() for e in found]
        shifted = dict(zip([e.name[:-len(facts.SUFFIX)] for e in found], contents[1:] + contents[:1], strict=True))
        tamper(cache_dir, lambda k, e: shifted[k])
    elif damage == "extra-field":
        tamper(cache_dir, changed_record(lambda r: (*r, "one more")))
    elif damage == "info-not-a-binary":
        tamper(cache_dir, changed_record(lambda r: (*r[:2], tuple(vars(r[2]).values()), *r[3:])))
    elif damage == "not-pickle":
        tamper(cache_dir, lambda k, e: sealed(b"\x80not pickle"))
    elif damage == "foreign-class":  # a pickle that would run a command: the facts unpickler builds facts only
        tamper(cache_dir, lambda k, e: sealed(pickle.dumps(Forged(tmp_path / "forged-ran"), protocol=5)))
    elif damage == "garbage":
        tamper(cache_dir, lambda k, e: os.urandom(len(e)))
    assert cache_hits(target, cache_dir, rules) == 0  # every entry refused, none used
    assert not (tmp_path / "forged-ran").exists()
    assert scan_json(target, cache_dir=cache_dir) == serial
    assert scan_json(target, "--jobs", "2", cache_dir=cache_dir) == serial
    assert cache_hits(target, cache_dir, rules) == len(entries(cache_dir))  # each written anew


def test_a_changed_file_is_read_again(tmp_path, scan):
    target = tmp_path / "tree"
    target.mkdir()
    shutil.copy(FIXTURES / "pe" / "plain.dll", target / "a.dll")
    first = scan(target, cache=True)
    shutil.copy(FIXTURES / "pe" / "app_ready.exe", target / "a.dll")  # new bytes, new size and mtime
    assert scan(target, cache=True) == scan(target, cache=False)
    assert scan(target, cache=True) != first


def test_cache_entries_are_private_digested_pickles_keyed_by_file_identity(tmp_path):
    import hashlib
    import io

    target = tmp_path / "tree"
    shutil.copytree(FIXTURES / "pe", target)
    cache_dir = tmp_path / "facts"
    scan_json(target, cache_dir=cache_dir)
    found = entries(cache_dir)
    assert found
    assert not cache_dir.stat().st_mode & 0o022  # private (made 0700 when the cache makes it: test_facts_cache.py)
    for entry in found:
        assert oct(entry.stat().st_mode & 0o777) == "0o600"
        data = entry.read_bytes()
        assert data[:SEAL_BYTES] == hashlib.sha256(data[SEAL_BYTES:]).digest()
        record = facts.FactsUnpickler(io.BytesIO(data[SEAL_BYTES:])).load()
        assert record[0] == entry.name[:-len(facts.SUFFIX)] and record[2].format in ("PE", "ELF")
    assert not list(cache_dir.glob(".*.tmp"))  # every write renamed into place
    # touching a file (same bytes, new mtime) makes its entry stale: a new key
    os.utime(next(p for p in sorted(target.iterdir()) if p.suffix == ".dll"), ns=(1, 1))
    scan_json(target, cache_dir=cache_dir)
    assert len(entries(cache_dir)) == len(found) + 1


def test_the_key_follows_the_version_and_the_facts_format(monkeypatch):
    import cuda4amd

    before = facts.scan_context("fast", None)
    assert facts.scan_context("fast", None) == before and len(before) == 64
    assert facts.scan_context("lief", None) != before
    monkeypatch.setattr(facts, "FACTS_FORMAT", facts.FACTS_FORMAT + 1)
    assert facts.scan_context("fast", None) != before
    monkeypatch.undo()
    monkeypatch.setattr(facts, "__version__", cuda4amd.__version__ + ".1")
    assert facts.scan_context("fast", None) != before


def test_rules_fingerprint_is_the_same_in_every_process(rules):
    import subprocess

    code = ("from cuda4amd.rules.ruleset import load_rules; from cuda4amd.scan.read.cache import canonical; "
            "import json, hashlib; r = load_rules(); "
            "print(hashlib.sha256(json.dumps(canonical((r.families, r.unknown, r.system))).encode()).hexdigest())")
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(seen) == 1


def test_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    from cuda4amd import userdirs
    from cuda4amd.fix.release import cache_dir

    monkeypatch.delenv(userdirs.FACTS_VARIABLE, raising=False)
    monkeypatch.setenv(userdirs.CACHE_VARIABLE, str(tmp_path / "base"))
    assert facts.facts_folder() == tmp_path / "base" / "facts"
    monkeypatch.setenv(userdirs.FACTS_VARIABLE, str(tmp_path / "here"))
    assert facts.facts_folder() == tmp_path / "here"
    monkeypatch.delenv(userdirs.FACTS_VARIABLE)
    monkeypatch.delenv(userdirs.CACHE_VARIABLE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert facts.facts_folder() == cache_dir() / "facts"  # one lookup for the ZLUDA downloads and the facts
    if sys.platform.startswith("linux"):
        assert facts.facts_folder() == tmp_path / "xdg" / "cuda4amd" / "facts"


def test_an_unwritable_cache_folder_only_turns_the_cache_off(tmp_path):
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    target = CASES["pe"]
    assert scan_json(target, cache_dir=blocked / "facts") == scan_json(target, "--no-cache")


def cache_hits(target, cache_dir, rules) -> int:
    """How many of the target's binaries the cache in ``cache_dir`` answers now (it writes nothing)."""
    from cuda4amd.scan import discover as discovery
    from cuda4amd.scan.read.payload import PayloadInspector

    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    found = discovery.discover(discovery.resolve_target(str(target))).binaries
    cache = facts.FactCache.open("fast", inspector, cache_dir)
    if cache is None:
        return 0
    try:
        answers = cache.get_all([cache.key(item, None) for item in found], found, inspector)
    finally:
        cache.close()
    assert cache.hits == sum(answer is not None for answer in answers)
    return cache.hits


def read_with_cache(target, cache_dir, rules):
    from cuda4amd.scan import discover as discovery
    from cuda4amd.scan.read.cache import FactCache
    from cuda4amd.scan.read.parallel import read_binaries
    from cuda4amd.scan.read.payload import PayloadInspector

    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    found = discovery.discover(discovery.resolve_target(str(target))).binaries
    cache = FactCache.open("fast", inspector, cache_dir)
    assert cache is not None
    try:
        result = read_binaries(None, found, "fast", inspector=inspector, jobs=2, cache=cache)
    finally:
        cache.close()
    return result, cache.hits, len(found)


def test_a_warm_cache_answers_every_file_and_a_damaged_one_none(tmp_path, rules):
    target = CASES["byname"]
    cold, hits, count = read_with_cache(target, tmp_path, rules)
    assert hits == 0 and count > 0
    warm, hits, _ = read_with_cache(target, tmp_path, rules)
    assert hits == count and warm == cold
    tamper(tmp_path, lambda k, e: e[:-2] + bytes([e[-2] ^ 1]) + e[-1:])
    again, hits, _ = read_with_cache(target, tmp_path, rules)
    assert hits == 0 and again == cold


def test_a_warm_cache_gives_every_fixture_equal_facts(tmp_path, rules):
    """Facts rebuilt from entries equal the ones read, fat binary entries (slotted) included."""
    (cold, _), hits, _ = read_with_cache(FIXTURES, tmp_path, rules)
    assert hits == 0
    (warm, _), hits, _ = read_with_cache(FIXTURES, tmp_path, rules)
    assert hits == len(cold) and warm == cold
    entries = [e for b in warm if b.kernels is not None for e in b.kernels.entries]
    assert entries and all(type(e).__slots__ for e in entries)
    assert [hash(e) for e in entries] == [hash(e) for b in cold if b.kernels is not None for e in b.kernels.entries]
    assert any(b.info.sections and b.info.imports for b in warm)
    assert any(b.info.undefined_symbols and b.info.soname for b in warm)
    assert not any(b.info.exports for b in warm)  # a scan leaves export names out (model.BinaryInfo)


def test_facts_pickle_cannot_write_are_read_again_not_an_error(tmp_path, rules):
    from cuda4amd.model import BinaryInfo, ReadOutcome, ScannedBinary
    from cuda4amd.scan.discover import FoundBinary
    from cuda4amd.scan.read.payload import PayloadInspector

    class Name(str):  # a class of this function: pickle cannot name it
        pass

    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    (tmp_path / "a.dll").write_bytes(b"MZ")
    item = FoundBinary("a.dll", "PE", 2, disk_path=str(tmp_path / "a.dll"))
    cache = facts.FactCache.open("fast", inspector, tmp_path / "facts")
    assert cache is not None
    key = cache.key(item, None)
    assert key is not None
    cache.put(key, ReadOutcome(ScannedBinary("a.dll", BinaryInfo("PE", "x86_64", 64, "dll", exports=(Name("f"),)))),
              item, inspector)
    assert entries(tmp_path / "facts") == [] and cache.written == 0
    cache.put(key, ReadOutcome(ScannedBinary("a.dll", BinaryInfo("PE", "x86_64", 64, "dll", exports=("f",)))),
              item, inspector)
    cache.commit()
    assert cache.get(key, item, inspector).binary.info.exports == ("f",)
    cache.close()


ACCEPTANCE_WHEELS = ("cupy-cuda12x==14.2.0", "ctranslate2==4.8.5", "nvidia-cuda-runtime-cu12==12.9.79",
                     "nvidia-cufft-cu12==11.4.1.4")




def test_a_worker_that_dies_loses_nothing(tmp_path, rules, monkeypatch):
    """A worker killed mid-read (as the OOM killer would): the rest is read in the main process."""
    from cuda4amd.scan import discover as discovery
    from cuda4amd.scan.read import parallel
    from cuda4amd.scan.read.payload import PayloadInspector

    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    found = discovery.discover(discovery.resolve_target(str(FIXTURES / "pe"))).binaries
    expected = parallel.read_binaries(None, found, "fast", inspector=inspector, jobs=1)
    real_read = parallel.read_item

    def dying_read(item, engine, inspector, archive):
        if item.path == found[-1].path and os.getpid() != main_pid:
            os._exit(9)
        return real_read(item, engine, inspector, archive)

    main_pid = os.getpid()
    monkeypatch.setattr(parallel, "read_item", dying_read)
    assert parallel.read_binaries(None, found, "fast", inspector=inspector, jobs=2) == expected


def test_workers_started_without_fork_get_the_rules_pickled(monkeypatch, rules):
    """What Windows, macOS and a process with other threads (the progress bar's) use."""
    import multiprocessing

    from cuda4amd.scan import discover as discovery
    from cuda4amd.scan.read import parallel
    from cuda4amd.scan.read.payload import PayloadInspector

    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    monkeypatch.setattr(parallel, "_context", lambda: multiprocessing.get_context(method))
    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    found = discovery.discover(discovery.resolve_target(str(FIXTURES / "byname"))).binaries
    expected = parallel.read_binaries(None, found, "fast", inspector=inspector, jobs=1)
    assert parallel.read_binaries(None, found, "fast", inspector=inspector, jobs=2) == expected


def test_worker_results_pickle_as_class_and_field_values(rules):
    """What a worker sends back: every model object as (class, field values), rebuilt equal by its __init__."""
    import dataclasses
    import pickle
    import pickletools

    from cuda4amd import model
    from cuda4amd.scan import discover as discovery
    from cuda4amd.scan.read import parallel
    from cuda4amd.scan.read.payload import PayloadInspector

    inspector = PayloadInspector(rules, rules.release(rules.default_release))
    found = discovery.discover(discovery.resolve_target(str(FIXTURES))).binaries
    outcomes = [parallel.read_item(item, "fast", inspector, None) for item in found]
    assert any(o.binary is not None and o.binary.kernels and o.binary.kernels.entries for o in outcomes)
    assert any(o.errors for o in outcomes)
    for outcome in outcomes:
        data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        assert pickle.loads(data) == outcome  # our own bytes
        # no per-object state to set: neither BUILD (dataclasses' __setstate__) nor NEWOBJ
        assert {op.name for op, _, _ in pickletools.genops(data)}.isdisjoint({"BUILD", "NEWOBJ", "NEWOBJ_EX"})
    plain = [cls for cls in vars(model).values() if isinstance(cls, type) and dataclasses.is_dataclass(cls)]
    for cls in plain:
        reduced = cls.__reduce__(cls(*[None] * len(dataclasses.fields(cls))))
        assert reduced == (cls, (None,) * len(dataclasses.fields(cls))), cls


def test_the_readers_answer_to_calls_cuda_is_what_a_fresh_look_says(rules):
    """Each reader process answers calls_cuda with the symbols it has seen so far: in any order it says what a
    fresh look at the binary's own symbols says (tests/unit/test_runtime.py: and what routes would work out). It
    leaves out the binaries routes never asks about: with kernels, NVIDIA's own, or importing a CUDA library."""
    from cuda4amd.scan import discover as discovery
    from cuda4amd.scan.read import parallel
    from cuda4amd.scan.read.payload import MAX_SYMBOLS, PayloadInspector

    found = discovery.discover(discovery.resolve_target(str(FIXTURES))).binaries
    answers = set()
    for order in (found, found[::-1]):
        inspector = PayloadInspector(rules, rules.release(rules.default_release))
        for item in order:
            binary = parallel.read_item(item, "fast", inspector, None).binary
            if binary is None:
                continue
            answers.add(binary.calls_cuda)
            if binary.calls_cuda is None:
                assert (binary.kernels is not None or inspector.kernel_scan(binary.path, binary.info) != "cheap"
                        or inspector.imports_cuda(binary.info)), binary.path
                continue
            fresh = any(rules.family_for_symbol(s) is not None for s in binary.info.undefined_symbols[:MAX_SYMBOLS])
            assert binary.calls_cuda == fresh, binary.path
    assert answers == {None, False}  # the fixtures that call CUDA functions import its libraries


# -- hostile files (issue 11, tests/unit/test_hostile_scan.py) in worker processes and through the cache --------

HOSTILE_PE = FIXTURES / "pe" / "blas_mixed.dll"


def hostile_read(found, rules, jobs, cache_dir=None):
    """read_binaries in `jobs` processes (through a facts cache in `cache_dir` when given), in a thread that must
    finish (a FIFO must never block a worker)."""
    from test_hostile_scan import finishes

    from cuda4amd.scan.read import parallel
    from cuda4amd.scan.read.payload import PayloadInspector

    inspector = PayloadInspector(rules, rules.release(rules.default_release))

    def read():
        # opened in the reading thread, as the scan does
        cache = facts.FactCache.open("fast", inspector, cache_dir) if cache_dir is not None else None
        try:
            return parallel.read_binaries(None, found, "fast", inspector=inspector, jobs=jobs, cache=cache)
        finally:
            if cache is not None:
                cache.close()

    return finishes(read)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_binary_swapped_for_a_fifo_is_one_error_in_a_worker_and_never_a_cache_hit(tmp_path, rules):
    from cuda4amd.scan import discover as discovery

    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("a.dll", "b.dll", "c.dll"):
        shutil.copy(HOSTILE_PE, tree / name)
    found = discovery.discover(discovery.resolve_target(str(tree))).binaries
    hostile_read(found, rules, 1, tmp_path / "facts")  # every file's facts cached
    assert len(entries(tmp_path / "facts")) == 3
    (tree / "b.dll").unlink()
    os.mkfifo(tree / "b.dll")
    for jobs, cache_dir in ((1, None), (2, None), (1, tmp_path / "facts"), (2, tmp_path / "facts")):
        binaries, errors = hostile_read(found, rules, jobs, cache_dir)
        assert [b.path for b in binaries] == ["a.dll", "c.dll"], (jobs, cache_dir)
        assert [(e.path, e.stage) for e in errors] == [("b.dll", "read")], (jobs, cache_dir)
        assert "not a regular file (a FIFO)" in errors[0].message
    assert len(entries(tmp_path / "facts")) == 3  # nothing recorded for the FIFO


def test_damaged_and_oversized_binaries_read_by_workers_and_cache_match_one_process(tmp_path):
    import struct

    from test_hostile_scan import ELF_FATBIN, _elf_section

    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.copy(HOSTILE_PE, tree / "good.dll")
    damaged = bytearray(HOSTILE_PE.read_bytes())  # e_lfanew off by 8: Windows refuses it
    struct.pack_into("<I", damaged, 0x3C, struct.unpack_from("<I", damaged, 0x3C)[0] + 8)
    (tree / "cuda_user.dll").write_bytes(damaged)
    huge = bytearray(ELF_FATBIN.read_bytes())  # a fat binary section claiming a terabyte (of sparse holes)
    header = _elf_section(huge, b".nv_fatbin")
    offset, = struct.unpack_from("<Q", huge, header + 0x18)
    struct.pack_into("<Q", huge, header + 0x20, 1 << 40)
    (tree / "libhuge.so").write_bytes(huge)
    try:
        os.truncate(tree / "libhuge.so", offset + (1 << 40))
    except OSError as exc:
        pytest.skip(f"this file system has no 1 TiB sparse files ({exc})")
    serial = scan_json(tree, "--jobs", "1", "--no-cache")
    errors = {(e["path"], e["stage"]): e["message"] for e in json.loads(serial)["errors"]}
    assert "e_lfanew" in errors[("cuda_user.dll", "read")]
    # ld.so maps only its PT_LOAD segment: the kernels are read through the wrappers, the claim noted
    assert "claims 0x10000000000 bytes of data" in errors[("libhuge.so", "loader")]
    assert scan_json(tree, "--jobs", "3", "--no-cache") == serial
    assert scan_json(tree, "--jobs", "3", cache_dir=tmp_path / "facts") == serial
    assert scan_json(tree, "--jobs", "1", cache_dir=tmp_path / "facts") == serial
    # good.dll and libhuge.so (its error recorded with it), not the refused one
    assert len(entries(tmp_path / "facts")) == 2


def test_corrupt_and_oversized_wheel_members_read_by_workers_and_cache_match_one_process(tmp_path, monkeypatch):
    from cuda4amd.scan import discover as discovery
    from cuda4amd.scan.read.sniff import SNIFF_BYTES

    wheel = tmp_path / "bad-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ("a.dll", "c.dll", "d.dll"):
            zf.writestr(f"pkg/{name}", HOSTILE_PE.read_bytes())
        zf.writestr("pkg/broken.dll", HOSTILE_PE.read_bytes(), zipfile.ZIP_STORED)
        zf.writestr("pkg/big.dll", HOSTILE_PE.read_bytes() + bytes(1 << 20))
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("pkg/broken.dll")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    # a byte past what discovery sniffs: the member is found, and reading it whole fails its CRC
    assert info.file_size > SNIFF_BYTES + 16
    data[start + info.file_size - 8] ^= 0x5A
    wheel.write_bytes(bytes(data))
    monkeypatch.setattr(discovery, "MAX_MEMBER_BYTES", 1 << 20)
    serial = scan_json(wheel, "--jobs", "1", "--no-cache")
    document = json.loads(serial)
    assert [b["path"] for b in document["binaries"]] == ["pkg/a.dll", "pkg/c.dll", "pkg/d.dll"]
    errors = {(e["path"], e["stage"]): e["message"] for e in document["errors"]}
    assert set(errors) == {("pkg/big.dll", "discover"), ("pkg/broken.dll", "read")}
    assert errors[("pkg/broken.dll", "read")].startswith("cannot read archive member: Bad CRC-32")
    assert scan_json(wheel, "--jobs", "2", "--no-cache") == serial
    assert scan_json(wheel, "--jobs", "2", cache_dir=tmp_path / "facts") == serial
    assert scan_json(wheel, "--jobs", "1", cache_dir=tmp_path / "facts") == serial
    assert len(entries(tmp_path / "facts")) == 3
