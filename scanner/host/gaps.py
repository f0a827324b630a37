"""What a host can and cannot serve: per-family gaps, checks and readiness.

``find_gaps(host, families)`` lists what this host lacks for each family that
ZLUDA redirects, as structured `Gap(family, code, text)`: the verdict shows
the text ("cuBLAS calls go to rocBLAS, which has no kernels for gfx1031"),
the fix planner filters by code. ``host_gaps`` groups the texts by family.
``readiness(host)`` is what ``doctor`` shows: one check per item with the
next step for each gap, and a one-line readiness verdict.

Reasons under ``driver_api`` are about the GPU and HIP runtime: every
redirected route (cuBLAS, cuDNN, ...) runs on ZLUDA's driver, so they apply to
all of them; library reasons are listed only under their own family. Which
AMD library a family's calls go to is rule data (``host_library`` in
families.toml).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from cuda4amd.host.detect import override_gfx
from cuda4amd.host.report import HostReport
from cuda4amd.host.sdk import KERNEL_LIBRARIES, LIBRARIES, version_key
from cuda4amd.rules.gpus import GpuProfiles, gfx_major
from cuda4amd.rules.ruleset import RuleSet, load_rules
from cuda4amd.words import counted

__all__ = [
    "GAP_CODES",
    "REDIRECTED_FAMILIES",
    "Check",
    "Gap",
    "Readiness",
    "effective_gfx",
    "family_libraries",
    "find_gaps",
    "host_gaps",
    "readiness",
]

#: family ids whose calls ZLUDA redirects to an AMD library (or implements itself)
REDIRECTED_FAMILIES: tuple[str, ...] = ("driver_api", "blas", "blaslt", "sparse", "dnn", "fft")
#: families a host must serve to be called ready (cuDNN is optional: many apps can turn it off)
CORE_FAMILIES = ("blas", "blaslt", "sparse")
#: what a Gap can be about
GAP_CODES: tuple[str, ...] = (
    "no-gpu", "not-rdna", "no-hip-runtime", "hip-sdk-too-old",  # driver_api: every route
    "no-hip-sdk", "library-missing", "kernel-folder-missing", "no-kernels",  # one family's AMD library
    "hip-path-unset",  # Windows: ZLUDA finds the library only next to itself or through HIP_PATH
)


@dataclass(frozen=True)
class Gap:
    """One thing the host lacks for a family: `code` (one of GAP_CODES) says
    what, `text` says it to a person."""

    family: str
    code: str
    text: str


def family_libraries(rules: RuleSet) -> dict[str, tuple[str, str]]:
    """family id -> (its name, the key of the AMD library its calls go to), from the rules."""
    return {f.id: (f.name, f.host_library) for f in rules.families
            if f.host_library is not None and f.host_library in LIBRARIES}


def effective_gfx(host: HostReport) -> tuple[str | None, str | None]:
    """(gfx the libraries must have kernels for, the HSA override that chose it).
    On Linux HSA_OVERRIDE_GFX_VERSION makes ROCm treat the GPU as another arch;
    on Windows it has no effect."""
    gpu = host.gpu
    gfx = gpu.gfx if gpu is not None else None
    if host.platform == "linux":
        ov = host.environment.get("HSA_OVERRIDE_GFX_VERSION")
        eff = override_gfx(ov)
        if eff and gfx:
            return eff, ov
    return gfx, None


def _driver_gaps(host: HostReport, profiles: GpuProfiles) -> list[Gap]:
    gpu = host.gpu
    reasons: list[Gap] = []
    prof = profiles.get(gpu.gfx) if gpu is not None else None
    if gpu is None:
        reasons.append(Gap("driver_api", "no-gpu", "no AMD GPU found"))
    elif gpu.gfx is None:
        pass  # unknown model (a display adapter name cuda4amd cannot map): doctor warns, no verdict reason
    elif prof is None:
        if gfx_major(gpu.gfx) < 10:  # gfx6..gfx9: GCN / CDNA, wave64
            reasons.append(Gap("driver_api", "not-rdna", f"{gpu.gfx} ({gpu.name}) is a wave64 GCN/CDNA GPU: "
                                                         f"upstream ZLUDA supports RDNA (gfx101x and newer) only"))
    elif not prof.upstream_zluda:
        reasons.append(Gap("driver_api", "not-rdna", f"{gpu.gfx} ({gpu.name}) is {prof.generation}: upstream "
                                                     f"ZLUDA supports RDNA (gfx101x and newer) only"))
    if host.hip_runtime is None:
        if host.platform == "windows":
            reasons.append(Gap("driver_api", "no-hip-runtime", "no HIP runtime (amdhip64_7.dll or amdhip64_6.dll) "
                                                               "found: it comes with the AMD Adrenalin driver"))
        else:
            reasons.append(Gap("driver_api", "no-hip-runtime",
                               "no HIP runtime (libamdhip64.so) found: it comes with ROCm"))
    sdk = host.sdk
    if (prof is not None and host.platform == "windows" and prof.min_windows_hip_sdk and sdk is not None
            and sdk.version and version_key(sdk.version) < version_key(prof.min_windows_hip_sdk)):
        reasons.append(Gap("driver_api", "hip-sdk-too-old", f"{prof.gfx} needs HIP SDK {prof.min_windows_hip_sdk} "
                                                            f"or newer on Windows; this one is {sdk.version}: "
                                                            f"install HIP SDK {prof.min_windows_hip_sdk} or newer"))
    return reasons


def _library_gaps(host: HostReport, family: str, cuda: str, key: str, profiles: GpuProfiles) -> list[Gap]:
    amd = LIBRARIES[key][0]
    sdk = host.sdk
    lead = f"{cuda} calls go to {amd}"
    # where to get it, where the rules say (gpus.toml [[pitfall]] miopen-install-<platform>)
    source = f"{key}-install-{host.platform}"
    install = f"install {amd} from {profiles.pitfall(source)}" if source in profiles.pitfalls else ""
    if sdk is None:
        what = "the HIP SDK" if host.platform == "windows" else "ROCm"
        return [Gap(family, "no-hip-sdk", f"{lead}, which needs {what}: none was found; install {what}"
                                          + (f"; {install}" if install else ""))]
    if not sdk.has(key):
        return [Gap(family, "library-missing", f"{lead}, which this HIP SDK ({sdk.label}) does not include: "
                                               + (install or f"install a HIP SDK (ROCm) release that ships {amd}"))]
    reasons = []
    gfx, override = effective_gfx(host)
    if key in KERNEL_LIBRARIES and gfx is not None:
        ks = sdk.kernels.get(key)
        if ks is None or ks.dir is None:
            reasons.append(Gap(family, "kernel-folder-missing", f"{lead}, whose per-arch kernel folder "
                                                                 f"({KERNEL_LIBRARIES[key]}) is missing from this HIP "
                                                                 f"SDK ({sdk.label}): reinstall it with {amd}"))
        elif not ks.has(gfx):
            text = f"{lead}, which has no kernels for {gfx}"
            if override:
                text += f" (HSA_OVERRIDE_GFX_VERSION={override})"
            prof = profiles.get(gfx)
            if key == "rocblas" and prof is not None and not prof.official_rocblas(host.platform):
                text += (f" (AMD ships none for this GPU): add third-party Tensile kernels for {gfx} to the SDK's "
                         f"{ks.dir}")
            else:
                text += f": install a HIP SDK (ROCm) release with {amd} kernels for {gfx}"
            if prof is not None and prof.linux_override and host.platform == "linux" and not override:
                text += f", or set HSA_OVERRIDE_GFX_VERSION={prof.linux_override}"
            reasons.append(Gap(family, "no-kernels", text))
    if host.platform == "windows" and "HIP_PATH" not in sdk.found_by:
        reasons.append(Gap(family, "hip-path-unset", f"ZLUDA finds {amd} next to itself or through HIP_PATH, which "
                                                     f"is not set: set HIP_PATH={sdk.root}"))
    return reasons


def find_gaps(host: HostReport, families: Iterable[str] = REDIRECTED_FAMILIES, *,
              rules: RuleSet | None = None, profiles: GpuProfiles | None = None) -> list[Gap]:
    """What this host lacks for each family id in `families` that ZLUDA
    redirects (REDIRECTED_FAMILIES, and any family whose rules name a
    host_library; others are ignored), in family order. `driver_api` gaps (no
    GPU, GCN, no HIP runtime) hold for every redirected route. cuFFT has
    none: ZLUDA's cuFFT is stubs whatever the host. `rules` (default: the
    shipped ones) gives the family -> AMD library map and, unless `profiles`
    does, the GPU profiles."""
    rules = rules if rules is not None else load_rules()
    profiles = profiles if profiles is not None else rules.gpus
    libraries = family_libraries(rules)
    gaps: list[Gap] = []
    for fam in dict.fromkeys(families):
        if fam == "driver_api":
            gaps += _driver_gaps(host, profiles)
        elif fam in libraries:
            gaps += _library_gaps(host, fam, *libraries[fam], profiles)
    return gaps


def host_gaps(host: HostReport, families: Iterable[str] = REDIRECTED_FAMILIES,
              profiles: GpuProfiles | None = None, *, rules: RuleSet | None = None) -> dict[str, list[str]]:
    """find_gaps' texts by family: for each family id in `families` that
    ZLUDA redirects (others are ignored), the reasons this host cannot serve
    it; an empty list when it can."""
    rules = rules if rules is not None else load_rules()
    known = set(REDIRECTED_FAMILIES) | set(family_libraries(rules))
    out: dict[str, list[str]] = {fam: [] for fam in dict.fromkeys(families) if fam in known}
    for gap in find_gaps(host, out, rules=rules, profiles=profiles):
        out[gap.family].append(gap.text)
    return out


# ---------------------------------------------------------------------------
# doctor's checks
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    topic: str                 # gpu | hip-runtime | hip-sdk | library | zluda | environment
    status: str                # ok | missing | warning | info
    text: str
    next_step: str = ""


@dataclass(frozen=True)
class Readiness:
    level: str                 # ready | partial | not-ready
    headline: str
    checks: tuple[Check, ...]
    gaps: Mapping[str, list[str]]

    @property
    def next_steps(self) -> list[str]:
        return list(dict.fromkeys(c.next_step for c in self.checks if c.next_step))


def _gpu_label(host: HostReport, i: int, profiles: GpuProfiles) -> str:
    g = host.gpus[i]
    prof = profiles.get(g.gfx)
    bits = [g.gfx or "gfx unknown"]
    if prof is not None:
        bits.append(prof.generation)
    if g.integrated is True:
        bits.append("integrated")
    elif g.integrated is False:
        bits.append("discrete")
    idx = f"HIP device {g.hip_index}: " if g.hip_index is not None else ""
    return f"{idx}{g.name} ({', '.join(bits)})"


def _gpu_checks(host: HostReport, profiles: GpuProfiles) -> list[Check]:
    win = host.platform == "windows"
    checks: list[Check] = []
    if not host.gpus:
        step = ("install an AMD Radeon RX 5000-series or newer GPU with the AMD Adrenalin driver (it provides "
                "the HIP runtime); if one is installed, update the driver" if win else
                "use an AMD Radeon RX 5000-series or newer GPU with the amdgpu kernel driver (KFD, /dev/kfd) "
                "and install ROCm")
        return [Check("gpu", "missing", "no AMD GPU found", step)]
    sel = host.selected_gpu
    gpu = host.gpu
    assert gpu is not None and sel is not None
    prof = profiles.get(gpu.gfx)
    for i in range(len(host.gpus)):
        mark = " — judged" if i == sel and len(host.gpus) > 1 else ""
        checks.append(Check("gpu", "ok" if i == sel else "info", _gpu_label(host, i, profiles) + mark))
    if gpu.gfx is None:
        checks.append(Check("gpu", "warning", f"the gfx target of {gpu.name} is unknown",
                            "run hipInfo.exe (HIP SDK) to see its gcnArchName" if win else "run rocminfo"))
    elif prof is None and gfx_major(gpu.gfx) < 10:
        checks.append(Check("gpu", "missing", f"{gpu.gfx} is a wave64 GCN/CDNA GPU: upstream ZLUDA supports "
                            "RDNA (gfx101x and newer) only",
                            "use an RDNA GPU (Radeon RX 5000 series or newer)"))
    elif prof is None:
        checks.append(Check("gpu", "warning", f"{gpu.gfx} is not in cuda4amd's GPU profiles: treated as RDNA",
                            "report this GPU to cuda4amd with the output of this command"))
    elif not prof.upstream_zluda:
        checks.append(Check("gpu", "missing", f"{gpu.gfx} is {prof.generation}: upstream ZLUDA supports RDNA "
                            f"(gfx101x and newer) only",
                            "use an RDNA GPU (Radeon RX 5000 series or newer), or a ZLUDA fork with wave64 "
                            "support (e.g. lshqqytiger's) at your own risk"))
    if len(host.gpus) > 1:
        visible = host.environment.get("HIP_VISIBLE_DEVICES")
        if gpu.hip_index is None:
            checks.append(Check("gpu", "warning", "several GPUs, and their HIP device order is unknown "
                                "(taken from the display adapters list)",
                                "run hipInfo.exe to see the device numbers, then set HIP_VISIBLE_DEVICES to "
                                f"the number of {gpu.name}"))
        elif visible is None and gpu.hip_index != 0:
            first = next((g for g in host.gpus if g.hip_index == 0), None)
            firstname = f"{first.name} ({first.gfx})" if first else "another GPU"
            checks.append(Check("gpu", "warning", f"apps use HIP device 0 first: {firstname}",
                                f"set HIP_VISIBLE_DEVICES={gpu.hip_index} so that apps use {gpu.name}"))
        elif visible is not None:
            checks.append(Check("gpu", "info", f"HIP_VISIBLE_DEVICES={visible} selects {gpu.name}"))
    if prof is not None:
        for p in prof.pitfalls:
            checks.append(Check("gpu", "info", p))
    return checks


def _runtime_check(host: HostReport) -> Check:
    rt = host.hip_runtime
    win = host.platform == "windows"
    if rt is None:
        return Check("hip-runtime", "missing",
                     "no HIP runtime found" + (" (amdhip64_7.dll / amdhip64_6.dll)" if win else " (libamdhip64.so)"),
                     "install or update the AMD Adrenalin driver" if win
                     else "install ROCm (it provides libamdhip64.so)")
    ver = f" {rt.version}" if rt.version else ""
    where = "driver" if rt.source == "driver" else "ROCm"
    text = f"{rt.library}{ver} ({where}{', ' + rt.path if rt.path else ''})"
    if rt.error and not rt.version:
        return Check("hip-runtime", "warning", f"{text}: {rt.error}", "update the AMD Adrenalin driver" if win else "")
    return Check("hip-runtime", "ok", text)


def _sdk_checks(host: HostReport, profiles: GpuProfiles, libraries: Mapping[str, tuple[str, str]]) -> list[Check]:
    win = host.platform == "windows"
    sdk = host.sdk
    if sdk is None:
        return [Check("hip-sdk", "missing", "no HIP SDK found" if win else "no HIP SDK (ROCm) found",
                      "install the AMD HIP SDK for Windows (6.4 is the reference version of the "
                      "CUDA-for-AMD-Windows project); its installer sets HIP_PATH" if win else
                      "install ROCm (/opt/rocm) for the math libraries ZLUDA uses")]
    checks = [Check("hip-sdk", "ok", f"HIP SDK {sdk.version or '(version unknown)'} in {sdk.root}"
                    f" (found by {', '.join(sdk.found_by)})" if win else
                    f"ROCm {sdk.full_version or sdk.version or '(version unknown)'} in {sdk.root}")]
    for i, other in enumerate(host.sdks):
        if i != host.selected_sdk:
            checks.append(Check("hip-sdk", "info", f"also installed: {other.version or '?'} in {other.root}"))
    if win and "HIP_PATH" not in sdk.found_by:
        checks.append(Check("hip-sdk", "warning", "HIP_PATH is not set: " + profiles.pitfall("hip-path-windows"),
                            f"set HIP_PATH={sdk.root}\\ (the HIP SDK installer normally does)"))
    gfx, override = effective_gfx(host)
    cuda_names = {key: cuda for cuda, key in libraries.values()}
    for key in (k for k in LIBRARIES if k in cuda_names):  # sdk.LIBRARIES order
        name = LIBRARIES[key][0]
        cuda = cuda_names[key]
        st = sdk.libraries.get(key)
        if st is None or not st.present:
            source = f"{key}-install-{host.platform}"  # where the rules say to get it (gpus.toml pitfalls)
            step = (f"install {name} from {profiles.pitfall(source)}" if source in profiles.pitfalls
                    else f"install {name} (a HIP SDK / ROCm that includes it)")
            if key == "miopen":
                step += ", or turn cuDNN off in the app"
            checks.append(Check("library", "missing", f"{name}: missing — {cuda} calls will fail", step))
            continue
        text = f"{name}: {st.file}"
        ks = sdk.kernels.get(key)
        if key in KERNEL_LIBRARIES and gfx:
            if ks is None or ks.dir is None:
                checks.append(Check("library", "missing", f"{text}, but its kernel folder "
                                    f"{KERNEL_LIBRARIES[key]} is missing", "reinstall the HIP SDK"))
                continue
            files = ks.files.get(gfx, ())
            if ks.has(gfx):
                shown = ", ".join(f for f in files if "lazy" in f or f.startswith("Kernels"))[:160]
                checks.append(Check("library", "ok", f"{text}; {counted(len(files), 'kernel file')} for {gfx}"
                                    + (f" ({shown})" if shown else "")))
            else:
                prof = profiles.get(gfx)
                official = prof is None or prof.official_rocblas(host.platform) or key != "rocblas"
                have = ", ".join(ks.archs) or "none"
                step = (f"this HIP SDK has no {name} kernels for {gfx} (it has: {have}): "
                        + ("install a HIP SDK version that includes them" if official else
                           f"AMD ships none; add third-party Tensile files for {gfx} to {ks.dir}"))
                if prof is not None and prof.linux_override and host.platform == "linux" and not override:
                    step += f", or set HSA_OVERRIDE_GFX_VERSION={prof.linux_override}"
                checks.append(Check("library", "missing", f"{text}, but no kernels for {gfx}"
                                    + (f" (HSA_OVERRIDE_GFX_VERSION={override})" if override else "")
                                    + f" — {cuda} calls will fail", step))
        else:
            checks.append(Check("library", "ok", text))
    return checks


def _zluda_checks(host: HostReport) -> list[Check]:
    if not host.zluda:
        step = ("get ZLUDA: the pinned upstream release v6-preview.69 (zluda-windows-87531d3.zip) from "
                "github.com/vosen/ZLUDA/releases" if host.platform == "windows" else
                "get ZLUDA for Linux from github.com/vosen/ZLUDA/releases")
        rec = next((p for p in host.probes if p.name == "zluda"), None)
        where = f" ({rec.detail})" if rec is not None and rec.detail else ""
        return [Check("zluda", "info", f"ZLUDA: not found{where}", step)]
    out = []
    for z in host.zluda:
        rel = f"release {' / '.join(z.releases)}" if z.releases else "release not recognised"
        out.append(Check("zluda", "ok", f"ZLUDA in {z.path} (via {', '.join(z.where)}): {rel}"
                         + (f", {z.matched}" if z.matched else "")))
    return out


def _env_checks(host: HostReport, profiles: GpuProfiles) -> list[Check]:
    out = []
    ov = host.environment.get("HSA_OVERRIDE_GFX_VERSION")
    if ov and host.platform == "windows":
        out.append(Check("environment", "warning", f"HSA_OVERRIDE_GFX_VERSION={ov} is set: "
                         + profiles.pitfall("hsa-override-windows"), "unset HSA_OVERRIDE_GFX_VERSION"))
    elif ov and host.platform == "linux":
        eff = override_gfx(ov)
        out.append(Check("environment", "info", f"HSA_OVERRIDE_GFX_VERSION={ov}: ROCm treats the GPU as "
                         f"{eff or 'an unparsable target'}"))
    return out


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def readiness(host: HostReport, profiles: GpuProfiles | None = None, *, rules: RuleSet | None = None) -> Readiness:
    """doctor's checks and headline; `rules` (default: the shipped ones) as for find_gaps."""
    rules = rules if rules is not None else load_rules()
    profiles = profiles if profiles is not None else rules.gpus
    libraries = family_libraries(rules)
    gaps = host_gaps(host, REDIRECTED_FAMILIES, profiles, rules=rules)
    checks = [*_gpu_checks(host, profiles), _runtime_check(host), *_sdk_checks(host, profiles, libraries),
              *_zluda_checks(host), *_env_checks(host, profiles)]
    gpu = host.gpu
    if gaps["driver_api"]:
        level = "not-ready"
        if gpu is None and host.sdk is None:
            what = "HIP SDK" if host.platform == "windows" else "HIP SDK (ROCm)"
            headline = f"NOT READY: no AMD GPU and no {what} found — ZLUDA cannot run CUDA apps on this machine"
        else:
            headline = "NOT READY: " + "; ".join(gaps["driver_api"])
    else:
        failing = [f for f in CORE_FAMILIES if gaps[f]]
        gfx = gpu.gfx if gpu is not None else "?"
        name = gpu.name if gpu is not None else "the GPU"
        if failing:
            level = "partial"
            libs = _join([libraries[f][0] for f in failing])
            headline = (f"PARTLY READY: {name} ({gfx}) works with ZLUDA's driver, but {libs} calls will fail: "
                        + gaps[failing[0]][0])
        else:
            level = "ready"
            sdk = host.sdk
            headline = (f"READY: {name} ({gfx}) with HIP SDK {sdk.version if sdk else '?'}: cuBLAS, "
                        f"cuBLASLt and cuSPARSE calls have their AMD libraries")
        if gaps["dnn"]:
            headline += ("; " if level == "partial" else "; but ") + gaps["dnn"][0]
    return Readiness(level, headline, tuple(checks), gaps)
