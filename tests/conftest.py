from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
SHARED_DATA = FIXTURES / "reference"  # a copy of the workplace's reference tables, with provenance

# the test modules import each other and these helpers by name (conftest, wheelcache, test_fix_support, ...):
# both folders on the path from the start, whichever pytest collects first
for folder in ("unit", "integration", ""):
    sys.path.insert(0, str(Path(__file__).parent / folder))


@pytest.fixture(autouse=True, scope="session")
def private_state_folder(tmp_path_factory):
    """The journal key and locks (cuda4amd.fix.state) of a test run, not the user's."""
    import os

    folder = tmp_path_factory.mktemp("state")
    names = ("XDG_STATE_HOME", "LOCALAPPDATA")
    saved = {n: os.environ.get(n) for n in names}
    for n in names:
        os.environ[n] = str(folder)
    yield folder
    for n, value in saved.items():
        if value is None:
            os.environ.pop(n, None)
        else:
            os.environ[n] = value


@pytest.fixture(scope="session")
def rules():
    from cuda4amd.rules.ruleset import load_rules

    return load_rules()


@pytest.fixture
def scan(rules):
    """Run the whole pipeline on a path and return the report document."""
    from cuda4amd.report.document import build
    from cuda4amd.scan.pipeline import ScanOptions, run_scan

    def run(target, **options):
        return build(run_scan(ScanOptions(target=str(target), **options), rules=rules))

    return run


def by_path(document: dict) -> dict[str, dict]:
    return {b["path"]: b for b in document["binaries"]}


def dependency(binary: dict, name: str) -> dict:
    (found,) = [d for d in binary["dependencies"] if d["name"].casefold() == name.casefold()]
    return found


@pytest.fixture(scope="session", autouse=True)
def private_facts_cache(tmp_path_factory):
    """Scans in tests (`scan` caches by default) use a cache of their own, not the user's."""
    import os

    folder = tmp_path_factory.mktemp("facts-cache")
    old = os.environ.get("CUDA4AMD_FACTS_CACHE")
    os.environ["CUDA4AMD_FACTS_CACHE"] = str(folder)
    yield folder
    if old is None:
        os.environ.pop("CUDA4AMD_FACTS_CACHE", None)
    else:
        os.environ["CUDA4AMD_FACTS_CACHE"] = old


def pytest_configure(config: pytest.Config) -> None:
    """Downloads of real wheels (tests/wheelcache.py) are said on the terminal as they start and end, past
    pytest's output capture: a first acceptance run fetches about 1.9 GB and should not look stuck."""
    import wheelcache

    def announce(text: str) -> None:
        # looked up when a download starts: the terminal reporter registers after this hook has run
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None or capture is None:
            print(text, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled():
            reporter.write_line(text)

    wheelcache.announce = announce
