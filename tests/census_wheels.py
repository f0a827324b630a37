"""Wheels of fixture binaries for the census tests (tests/unit/test_census.py, tests/integration/
test_census_page.py): written into a folder, never kept."""
from __future__ import annotations

import zipfile
from pathlib import Path

from conftest import FIXTURES

#: a distribution name with markup: it must reach the census page as text
HOSTILE = 'evil<script>alert(1)</script>"&'


def write_wheel(folder: Path, name: str, version: str, members: dict[str, bytes], platform: str = "win_amd64",
                metadata_name: str | None = None) -> Path:
    path = folder / f"{name}-{version}-py3-none-{platform}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for arcname, data in members.items():
            z.writestr(arcname, data)
        z.writestr(f"{name}-{version}.dist-info/METADATA", f"Name: {metadata_name or name}\nVersion: {version}\n")
        z.writestr(f"{name}-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return path


def fixture_wheels(folder: Path) -> Path:
    """Two good wheels of fixture binaries for Windows, one for Linux, one whose METADATA names it with
    markup (HOSTILE), and one that is not a zip; ``folder`` is made."""
    folder.mkdir()
    write_wheel(folder, "appready", "1.0", {"appready/app.exe": (FIXTURES / "pe/app_ready.exe").read_bytes()})
    write_wheel(folder, "blasmix", "2.0", {"blasmix/blas.dll": (FIXTURES / "pe/blas_mixed.dll").read_bytes()})
    write_wheel(folder, "cublas", "12.0", {"cublas/libcublas.so.12": (FIXTURES / "elf/libcublas.so.12").read_bytes()},
                platform="manylinux_2_28_x86_64")
    write_wheel(folder, "hostile", "1.0", {"hostile/blas.dll": (FIXTURES / "pe/blas_mixed.dll").read_bytes()},
                metadata_name=HOSTILE)
    (folder / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip <b>at all</b>")
    return folder
