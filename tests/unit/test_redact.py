"""Redaction: home folder, user and host names out of every file report, whatever their shape."""
from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from conftest import FIXTURES, by_path, dependency
from hypothesis import example, given, settings
from hypothesis import strategies as st

from cuda4amd.report.redact import HOME, HOST, USER, PrivateStrings, Redactor, private_strings

WINDOWS = PrivateStrings(homes=("C:\\Users\\Bob Smith",), users=("Bob Smith", "bsmith"), hosts=("DESKTOP-7QX1.corp.example",))
POSIX = PrivateStrings(homes=("/home/j.doe+ci",), users=("j.doe+ci",), hosts=("Ünïcode-Box",))


@pytest.mark.parametrize(("private", "raw", "redacted"), [
    # the home folder: any case, either separator, doubled backslashes (as in a repr)
    (WINDOWS, "C:\\Users\\Bob Smith\\venv\\Lib", "<home>\\venv\\Lib"),
    (WINDOWS, "c:/users/BOB SMITH/venv", "<home>/venv"),
    (WINDOWS, "'C:\\\\Users\\\\Bob Smith\\\\x.dll'", "'<home>\\\\x.dll'"),
    (WINDOWS, "found in C:\\Users\\Bob Smith.", "found in <home>."),
    # any user's profile folder, even unknown; not the shared ones
    (WINDOWS, "D:\\Users\\alice\\app and more", "<home>\\app and more"),
    (WINDOWS, "C:\\Users\\Public\\Documents", "C:\\Users\\Public\\Documents"),
    (WINDOWS, "/mnt/c/Users/Alice/x", "<home>/x"),
    # the user name inside paths and words, any case, but not inside a longer word
    (WINDOWS, "E:\\build\\BSMITH\\bin", "E:\\build\\<user>\\bin"),
    (WINDOWS, "bsmith_build/bsmith-tools/x", "<user>_build/<user>-tools/x"),
    (WINDOWS, "bsmithy and xbsmith stay", "bsmithy and xbsmith stay"),
    (WINDOWS, "owner: bob smith", "owner: <user>"),
    # the host name, its first label too
    (WINDOWS, "\\\\desktop-7qx1.corp.example\\share", "\\\\<host>\\share"),
    (WINDOWS, "built on DESKTOP-7QX1", "built on <host>"),
    # POSIX homes, odd characters in names
    (POSIX, "/home/j.doe+ci/.venv/lib", "<home>/.venv/lib"),
    (POSIX, "/HOME/J.DOE+CI/x", "<home>/x"),
    (POSIX, "/home/someone-else/x", "<home>/x"),
    (POSIX, "/usr/home/x and /homely/x", "/usr/home/x and /homely/x"),
    (POSIX, "/srv/j.doe+ci/x", "/srv/<user>/x"),
    (POSIX, "ünïcode-box.local", "<host>.local"),
    # placeholders survive names that spell them
    (PrivateStrings(users=("user", "home"), hosts=("host",)), "<user> <home> <host> user", "<user> <home> <host> <user>"),
])
def test_odd_names_in_odd_places(private, raw, redacted):
    assert Redactor(private, cwd="/nowhere").text(raw) == redacted


def test_short_or_root_values_are_not_redacted():
    redactor = Redactor(PrivateStrings(homes=("/", "C:\\"), users=("a",), hosts=("",)), cwd="/nowhere")
    assert redactor.text("a /usr/lib C:\\x") == "a /usr/lib C:\\x"


def test_private_strings_come_from_every_usual_source(monkeypatch):
    import getpass
    import socket

    monkeypatch.setattr(getpass, "getuser", lambda: "root")
    monkeypatch.setattr(socket, "gethostname", lambda: "vm")
    found = private_strings({"HOME": "/home/x", "USERPROFILE": "C:\\Users\\Y", "HOMEDRIVE": "D:", "HOMEPATH": "\\Users\\Z",
                             "USERNAME": "Y", "USER": "root", "COMPUTERNAME": "PC-1", "HOSTNAME": "vm"})
    assert {"/home/x", "C:\\Users\\Y", "D:\\Users\\Z"} <= set(found.homes)
    assert set(found.users) == {"root", "Y"}
    assert set(found.hosts) == {"vm", "PC-1"}


def test_target_paths():
    redactor = Redactor(WINDOWS, cwd="C:\\Users\\Bob Smith\\work", target_root="C:\\Users\\Bob Smith\\work\\app")
    assert redactor.target_path("C:\\Users\\Bob Smith\\work\\app") == "app"
    assert redactor.target_path("c:\\users\\bob smith\\WORK\\app\\") == "app"
    assert redactor.target_path("C:\\Users\\Bob Smith\\other") == "<home>\\other"
    assert redactor.target_path("app") == "app"
    assert redactor.target_path("D:\\Apps\\Tool") == "D:\\Apps\\Tool"  # nothing private: kept
    # a library found inside the target is relative to it; the target elsewhere in text is a placeholder
    assert redactor.resolved("C:\\Users\\Bob Smith\\work\\app\\lib\\x.dll") == "lib/x.dll"
    assert redactor.resolved("C:\\Users\\Bob Smith\\vendor\\x.dll") == "<home>\\vendor\\x.dll"
    assert redactor.text("cannot read C:\\Users\\Bob Smith\\work\\app\\x.dll") == "cannot read <target>\\x.dll"
    assert Redactor(POSIX, cwd="/").target_path("/opt/app") == "/opt/app"  # "/" is no place to be relative to


def test_a_scan_document_is_redacted_and_keeps_its_vocabulary(tmp_path, scan):
    """Names hidden in folder names, a search path under the home folder, a user called like a route."""
    home = tmp_path / "Quirky-User"
    app = home / "QUIRKY-USER_apps" / "Tool"
    shutil.copytree(FIXTURES / "demo" / "Tool", app)
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_app.exe", app)
    vendor = home / "vendor"
    vendor.mkdir()
    (vendor / "missing_vendor.dll").write_bytes(b"")
    inside = app / "extra"
    inside.mkdir()
    (inside / "chain_util.dll").write_bytes(b"")
    document = scan(app, search_paths=(vendor, inside))
    private = PrivateStrings(homes=(str(home),), users=("quirky-user", "static", "blocked"), hosts=("redirect",))
    before = json.dumps(document)
    redacted = Redactor(private, target_root=app, cwd=tmp_path / "elsewhere").document(document)
    assert json.dumps(document) == before, "the input is not changed"

    text = json.dumps(redacted)
    assert str(tmp_path) not in text and "uirky" not in text.lower()
    assert redacted["target"]["path"] == f"{HOME}/QUIRKY-USER_apps/Tool".replace("QUIRKY-USER", USER)
    chain = by_path(redacted)["chain_app.exe"]
    assert dependency(chain, "missing_vendor.dll")["resolved"] == f"{HOME}/vendor/missing_vendor.dll"
    assert dependency(chain, "CHAIN_UTIL.dll")["resolved"] == "extra/chain_util.dll"  # a search path inside the target
    # enumerations and function names are never touched, whatever the user is called (prose is)
    vocabulary = ("format", "machine", "kind", "verdict", "kernels", "nvidia_library")
    dep_vocabulary = ("family", "load", "route", "basis", "how", "symbols", "ordinals", "replacement")
    for b, rb in zip(document["binaries"], redacted["binaries"], strict=True):
        assert [b[k] for k in vocabulary] == [rb[k] for k in vocabulary]
        assert [[d[k] for k in dep_vocabulary] for d in b["dependencies"]] == [[d[k] for k in dep_vocabulary] for d in rb["dependencies"]]
    assert {d["load"] for b in redacted["binaries"] for d in b["dependencies"]} == {"static"}
    assert "blocked" in {b["verdict"] for b in redacted["binaries"]}
    assert "loads render.dll (<user>)" in text  # the prose does lose a user called "static"
    assert HOST not in text


def test_host_block_and_free_text_are_redacted():
    document = {"schema": "cuda4amd.scan/2", "target": {"path": "x", "kind": "folder"}, "basis": "judged for bsmith's box",
                "host": {"schema": "cuda4amd.host/1", "platform": "windows", "os": "Windows on DESKTOP-7QX1",
                         "zluda": [{"path": "C:\\Users\\Bob Smith\\zluda", "where": ["PATH"]}]},
                "binaries": [], "errors": [{"path": "a.dll", "stage": "read", "message": "C:\\Users\\Bob Smith\\a.dll: bad"}]}
    redacted = Redactor(WINDOWS, cwd="/nowhere").document(document)
    assert redacted["basis"] == "judged for <user>'s box"
    assert redacted["host"]["os"] == "Windows on <host>"
    assert redacted["host"]["zluda"][0]["path"] == "<home>\\zluda"
    assert redacted["errors"][0]["message"] == "<home>\\a.dll: bad"


@pytest.fixture
def named_tree(tmp_path, monkeypatch):
    """The demo app under a folder named like the (injected) user, with a search path in the home folder."""
    import cuda4amd.report.redact

    home = tmp_path / "home" / "Zed"
    app = home / "apps" / "ZED-Tool"
    shutil.copytree(FIXTURES / "demo" / "Tool", app)
    shutil.copy(FIXTURES / "pe" / "chain" / "chain_app.exe", app)
    (home / "lib").mkdir()
    (home / "lib" / "missing_vendor.dll").write_bytes(b"")
    monkeypatch.setattr(cuda4amd.report.redact, "private_strings",
                        lambda: PrivateStrings(homes=(str(home),), users=("zed",), hosts=("zed-pc",)))
    monkeypatch.chdir(tmp_path)
    return home, app


@pytest.mark.parametrize("fmt", ["json", "toml", "markdown", "console"])
def test_file_reports_are_redacted_by_default(named_tree, tmp_path, fmt):
    from cuda4amd.cli import main

    home, app = named_tree
    out = tmp_path / "report.out"
    args = ["scan", str(app), "--host", "none", "--search-path", str(home / "lib"), "--format", fmt, "-o", str(out), "--graph", str(tmp_path / "g.dot")]
    # the empty missing_vendor.dll found through --search-path cannot be read: incomplete, exit 9
    # (docs/exit-status.md, rule 3)
    assert CliRunner().invoke(main, args).exit_code == 9
    for content in (out.read_text(encoding="utf-8"), (tmp_path / "g.dot").read_text(encoding="utf-8")):
        assert str(home) not in content and "zed" not in content.lower(), content
    if fmt in ("json", "toml"):
        assert "<home>/lib/missing_vendor.dll" in out.read_text(encoding="utf-8")
    assert CliRunner().invoke(main, [*args, "--no-redact"]).exit_code == 9
    assert str(app) in out.read_text(encoding="utf-8")
    if fmt in ("json", "toml"):
        assert str(home / "lib" / "missing_vendor.dll") in out.read_text(encoding="utf-8")


def test_stdout_json_is_redacted_and_the_terminal_summary_is_not(named_tree):
    from cuda4amd.cli import main

    home, app = named_tree
    result = CliRunner().invoke(main, ["scan", str(app), "--host", "none", "--format", "json"])
    document = json.loads(result.output)
    assert document["target"]["path"] == "home/<user>/apps/<user>-Tool"  # relative to the working folder
    assert str(home) not in result.output
    console = CliRunner().invoke(main, ["scan", str(app), "--host", "none"])
    assert str(app) in console.output  # the user's own screen


# Pieces a string of a report may be made of: the private strings above in any case, separators, words of
# the generic home folders, and letters that Unicode's case rules match to ASCII ones (the Kelvin sign, a
# long s, a dotted capital I, a dotless i)
_PIECES = ["bob smith", "BSMITH", "Bob", "desktop-7qx1", "DESKTOP-7QX1.corp", "j.doe+ci", "J.DOE+CI", "Ünïcode-Box",
           "ünïcode", "/home/", "/HOME/", "C:\\Users\\", "c:/users/", "D:\\Documents and Settings\\", "Public",
           "/mnt/c", "/srv/Data Tree", "/SRV/data tree/", "C:\\Users\\Bob Smith\\app", "\\", "/", ".", "-", "_",
           " ", "<", ">", "x", "lib", "cublas64_12.dll", "\u212a", "\u017f", "\u0130", "\u0131", "ß", "é", "kelvin", "sam"]


@given(st.lists(st.sampled_from(_PIECES), max_size=10).map("".join))
@example("/home/x/lib")
@example("C:\\Users\\alice\\x")
@example("E:\\Documents and Settings\\al\\x")
@example("/srv/Data Tree/lib/x.so")
@example("BOB-laptop/x")
@example("\u212aelvin/bob")
@example("/home/bo\u017f")
@example("x/\u212aELVIN/x")
@example("sam/x")
@example("/srv/\u017fam/x")  # the target /srv/sam: IGNORECASE matches a long s for "s", which stays as it is lowered
@example("/srv/istan/x")  # the target /srv/İstan: IGNORECASE matches "i" for "İ", which lowers to two letters
@settings(max_examples=500, deadline=None)
def test_the_quick_test_for_a_string_no_pattern_can_match_changes_nothing(raw):
    """Redactor.text skips the patterns for an ASCII string that holds none of what they need; whatever
    the string, it gives what the patterns alone give."""
    odd = PrivateStrings(homes=("/home/kelvin",), users=("kelvin", "\u017fam"), hosts=("box",))  # U+017F (long s) folds to "s": "sam" too
    for private in (WINDOWS, POSIX, PrivateStrings(homes=("/home/bob",), users=("bob",), hosts=("bob-laptop.lan",)),
                    PrivateStrings(homes=("/home/kelvin",), users=("kelvin",), hosts=("box",)), odd):
        for target_root in ("/srv/Data Tree", "C:\\Users\\Bob Smith\\app", "/srv/\u0130stan", "/srv/sam", None):
            redactor = Redactor(private, target_root=target_root, cwd="/")
            for target in (True, False):
                assert redactor.text(raw, target=target) == redactor._text(raw, target)
