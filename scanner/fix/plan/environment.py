"""The environment a plan sets: HIP_PATH, ZLUDA's folder on PATH / LD_LIBRARY_PATH, LD_AUDIT where
the loader would find NVIDIA's library first, and the framework switches the scan's packages ask for."""
from __future__ import annotations

import posixpath
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cuda4amd.fix.plan.model import STORE_DIR, EnvVar, expand_parts, literal_path, root_path
from cuda4amd.words import settings

if TYPE_CHECKING:
    from cuda4amd.host.sdk import HipSdk
    from cuda4amd.rules.frameworks import Framework
    from cuda4amd.rules.ruleset import RuleSet
    from cuda4amd.scan.pipeline import ScanResult
    from cuda4amd.scan.verdict import BinaryVerdict

__all__ = ["advice", "environment"]


def environment(result: ScanResult, rules: RuleSet, platform: str, mode: str, sdk: HipSdk | None,
                ld_audit: bool, frameworks: Iterable[Framework] | None, warnings: list[str]) -> list[EnvVar]:
    """The variables of the plan, in the order the launchers set them."""
    env: list[EnvVar] = []
    sep = "\\" if platform == "windows" else "/"
    if sdk is not None:
        sdk_root = sdk.root.rstrip("\\/")
        hip_path = sdk_root + "\\" if platform == "windows" else sdk_root
        env.append(EnvVar("HIP_PATH", "set", (literal_path(hip_path, platform),),
                          "ZLUDA finds rocBLAS, hipBLASLt, rocSPARSE and MIOpen through it"))
    if mode == "launcher":
        store = root_path(STORE_DIR, platform)
        if platform == "windows":
            values = [store] + ([literal_path(sdk.root.rstrip("\\") + sep + "bin", platform)] if sdk else [])
            env.append(EnvVar("PATH", "prepend", tuple(values), "ZLUDA's folder, then the HIP SDK's bin"))
        else:
            values = [store]
            if sdk is not None:
                lib = sdk.libraries.get("rocblas")
                lib_dir = posixpath.dirname(lib.file) if lib and lib.file else "lib"
                values.append(literal_path(sdk.root.rstrip("/") + "/" + (lib_dir or "lib"), platform))
            env.append(EnvVar("LD_LIBRARY_PATH", "prepend", tuple(values), "ZLUDA's libraries, then ROCm's"))
            if ld_audit:
                env.append(EnvVar("LD_AUDIT", "prepend", (root_path(f"{STORE_DIR}/zluda_ld", platform),),
                                  "an RPATH or a load by full path would find NVIDIA's library first"))
    elif platform == "linux" and sdk is not None:
        lib = sdk.libraries.get("rocblas")
        lib_dir = posixpath.dirname(lib.file) if lib and lib.file else "lib"
        env.append(EnvVar("LD_LIBRARY_PATH", "prepend", (literal_path(sdk.root.rstrip("/") + "/" + lib_dir,
                                                                     platform),), "ROCm's libraries"))
    for name, value, why in _framework_switches(result, rules, platform, frameworks, warnings):
        env.append(EnvVar(name, "set", ((("lit", value),),), why))
    return env


def _framework_switches(result: ScanResult, rules: RuleSet, platform: str, frameworks: Iterable[Framework] | None,
                        warnings: list[str]) -> list[tuple[str, str, str]]:
    """(name, value, why) of the environment switches the scan's packages ask
    for: env switches that avoid a blocked or stubbed family (or SASS-only
    kernels) of the package, and those recommended under ZLUDA — each only
    where the package's advice gives it (no switch for a part that cannot run,
    or for another platform: docs/exit-status.md, rule 5)."""
    packages = [p for p in getattr(result, "packages", []) if p.framework]
    if not packages:
        return []
    from cuda4amd.rules.frameworks import SASS_ONLY

    if frameworks is None:
        frameworks = rules.frameworks
    by_id = {fw.id: fw for fw in frameworks}
    by_dist: dict[str, list[BinaryVerdict]] = {}
    for v in result.verdicts:
        if v.binary.distribution:
            by_dist.setdefault(v.binary.distribution, []).append(v)
    chosen: dict[str, tuple[str, str]] = {}
    for pkg in packages:
        fw = by_id.get(pkg.framework)
        if fw is None:
            continue
        owned = [v for v in by_dist.get(pkg.name, []) if v.verdict != "no-cuda"]
        hit = {d.identity.family for v in owned for d in v.dependencies
               if d.identity.family and d.identity.route in ("blocked", "stub")}
        if any(v.binary.kernels is not None and v.binary.kernels.state == "sass-only" for v in owned):
            hit.add(SASS_ONLY)
        advised = {setting for line in pkg.advice for setting in settings(line)}
        for sw in fw.switches:
            if sw.kind != "env" or (sw.platform and sw.platform != platform):
                continue
            if not settings(sw.setting) <= advised:
                continue  # the scan did not advise it for this package
            if not (sw.recommended or set(sw.avoids) & hit):
                continue
            name, sep, value = sw.setting.partition("=")
            name = name.strip()
            if not sep or not name.replace("_", "").isalnum():
                continue
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            why = f"{fw.name}: " + ("recommended under ZLUDA" if sw.recommended and not set(sw.avoids) & hit
                                    else "avoids " + ", ".join(fw.family_name(a) for a in sw.avoids))
            if name in chosen and chosen[name][0] != value:
                warnings.append(f"{name}: {fw.name} asks for {value!r}, another package for "
                                f"{chosen[name][0]!r}; the first is kept")
                continue
            chosen.setdefault(name, (value, why))
    return [(n, v, w) for n, (v, w) in chosen.items()]


def advice(variables: list[EnvVar], mode: str) -> list[str]:
    """Place mode sets no environment: what the user sets where the application starts."""
    if mode != "place":
        return []
    return [f"set {e.name}={expand_parts(e.values[0], '<target>')} in the environment the application starts "
            f"in ({e.why})" for e in variables if e.op == "set" and e.name != "HIP_PATH"]


