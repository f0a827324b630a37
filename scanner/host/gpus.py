"""GPU detection: which AMD GPUs the machine has and their ``gfx`` targets.

Windows, first source that finds a GPU wins:
  1. the driver's HIP runtime through ctypes (amdhip64_7.dll, then amdhip64_6.dll):
     names and gcnArchName, in HIP's own device order;
  2. ``hipInfo.exe`` of an installed HIP SDK (same facts, as text);
  3. the display adapters (PowerShell ``Get-CimInstance Win32_VideoController``),
     mapped to a gfx by model name or PCI device id through the GPU profiles.
Linux:
  1. KFD topology in sysfs (``gfx_target_version`` of each node), names from
     ``rocminfo`` when it runs (matched by node number);
  2. ``rocminfo`` alone; 3. ``rocm_agent_enumerator``.

Only names, gfx targets, integrated flags, PCI device ids and memory sizes are
kept: UUIDs, serial numbers, unique ids and PCI instance paths are never read
into a Gpu.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from cuda4amd.host.probes import CommandResult, HipRuntimeResult, Probes, pathmod
from cuda4amd.rules.gpus import GpuProfiles, base_gfx, gfx_from_target_version, zluda_capable

__all__ = [
    "CIM_COMMAND",
    "KFD_NODES",
    "Gpu",
    "GpuDetection",
    "ProbeRecord",
    "detect_gpus",
    "parse_agent_enumerator",
    "parse_cim_json",
    "parse_hipinfo",
    "parse_rocminfo",
    "read_kfd_nodes",
    "select_gpu",
]

KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"
#: the PowerShell pipeline run for the display adapters: only the fields used
CIM_COMMAND = ("Get-CimInstance -ClassName Win32_VideoController | "
               "Select-Object Name,AdapterCompatibility,VideoProcessor,PNPDeviceID,DriverVersion,AdapterRAM | "
               "ConvertTo-Json -Compress")


@dataclass(frozen=True)
class Gpu:
    name: str
    gfx: str | None                # base target, e.g. "gfx1100"; None: not known
    source: str                    # hip-runtime | hipinfo | cim | kfd | rocminfo | rocm_agent_enumerator
    integrated: bool | None = None
    target: str | None = None      # as reported, with features: "gfx1030:sramecc-:xnack-"
    hip_index: int | None = None   # HIP device index (HIP_VISIBLE_DEVICES), when the source gives it
    pci_id: str | None = None      # PCI device id, "744C"
    memory_gb: float | None = None
    driver_version: str | None = None  # display driver (Windows adapters list)


@dataclass(frozen=True)
class ProbeRecord:
    """One probe that ran: name, status (ok | empty | not-found | error | skipped), detail."""

    name: str
    status: str
    detail: str = ""


@dataclass(frozen=True)
class GpuDetection:
    gpus: tuple[Gpu, ...]
    records: tuple[ProbeRecord, ...]


# ---------------------------------------------------------------------------
# parsers (pure)
# ---------------------------------------------------------------------------

def parse_hipinfo(text: str) -> list[dict[str, str]]:
    """hipInfo's per-device 'key: value' blocks ('device#  N' starts one).
    Lines of AMD_LOG_LEVEL tracing (':3:...') are ignored."""
    devices: list[dict[str, str]] = []
    cur: dict[str, str] | None = None
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(":") or s.startswith("-----"):
            continue
        m = re.match(r"^device#\s+(\d+)\s*$", s)
        if m:
            cur = {"device#": m.group(1)}
            devices.append(cur)
            continue
        if cur is None:
            continue
        m = re.match(r"^([A-Za-z][\w.]*):\s*(.*?)\s*$", s)
        if m and m.group(1) not in cur:
            cur[m.group(1)] = m.group(2)
    return [d for d in devices if d.get("Name") or d.get("gcnArchName")]


def _memory_gb(text: str | None) -> float | None:
    if not text:
        return None
    m = re.match(r"^([\d.]+)\s*(GB|MB)$", text.strip())
    if not m:
        return None
    v = float(m.group(1))
    return round(v / 1024 if m.group(2) == "MB" else v, 2)


def parse_cim_json(text: str) -> list[dict[str, Any]]:
    """Win32_VideoController rows from ConvertTo-Json: one object for one
    adapter, an array for several; flat (Select-Object) or the raw CimInstance
    form with CimInstanceProperties [{Name, Value}, ...]."""
    text = text.strip().lstrip("\ufeff")
    if not text:
        return []
    data = json.loads(text)
    rows = data if isinstance(data, list) else [data]
    out = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        if isinstance(row.get("CimInstanceProperties"), list):
            flat = {p.get("Name"): p.get("Value") for p in row["CimInstanceProperties"] if isinstance(p, dict)}
            flat.update({k: v for k, v in row.items() if k != "CimInstanceProperties" and k not in flat})
            row = flat
        out.append(row)
    return out


def _pci_from_adapter(row: dict[str, Any]) -> tuple[str | None, str | None]:
    """(vendor, device) ids from PNPDeviceID 'PCI\\VEN_1002&DEV_744C&...' or
    VideoProcessor '... (0x744C)'. The instance part of PNPDeviceID is dropped."""
    pnp = str(row.get("PNPDeviceID") or "")
    m = re.search(r"VEN_([0-9A-Fa-f]{4})&DEV_([0-9A-Fa-f]{4})", pnp)
    if m:
        return m.group(1).upper(), m.group(2).upper()
    vp = str(row.get("VideoProcessor") or "")
    m = re.search(r"\(0x([0-9A-Fa-f]{4})\)", vp)
    if m:
        return None, m.group(1).upper()
    return None, None


def is_amd_adapter(row: dict[str, Any]) -> bool:
    vendor, _ = _pci_from_adapter(row)
    if vendor is not None:
        return vendor == "1002"
    compat = str(row.get("AdapterCompatibility") or "")
    name = str(row.get("Name") or "")
    return "advanced micro devices" in compat.lower() or "radeon" in name.lower()


def parse_rocminfo(text: str) -> list[dict[str, str]]:
    """The HSA agents of rocminfo's output (top-level 'Key: value' of each
    'Agent N' block; pool and ISA sub-blocks are skipped)."""
    agents: list[dict[str, str]] = []
    cur: dict[str, str] | None = None
    for line in text.splitlines():
        s = line.strip()
        if re.fullmatch(r"Agent \d+", s):
            cur = {}
            agents.append(cur)
            continue
        if cur is None or not s or s.startswith("*"):
            continue
        indent = len(line) - len(line.lstrip(" "))
        m = re.match(r"^([A-Za-z][\w .()/-]*?):\s*(.*?)\s*$", s)
        if m and indent <= 2 and m.group(1) not in cur:
            cur[m.group(1)] = m.group(2)
    return agents


def parse_agent_enumerator(text: str) -> list[str]:
    return [t for t in (x.strip() for x in text.splitlines()) if re.fullmatch(r"gfx[0-9a-f]+", t) and t != "gfx000"]


def read_kfd_nodes(probes: Probes, root: str = KFD_NODES) -> list[tuple[int, dict[str, int]]]:
    """(node number, properties) of every KFD topology node, in node order."""
    nodes = []
    for name in probes.fs.listdir(root):
        if not name.isdigit():
            continue
        text = probes.fs.read_text(f"{root}/{name}/properties", limit=64 << 10)
        if text is None:
            continue
        props: dict[str, int] = {}
        for line in text.splitlines():
            parts = line.split()
            if len(parts) == 2 and re.fullmatch(r"-?\d+", parts[1]):
                props[parts[0]] = int(parts[1])
        nodes.append((int(name), props))
    return sorted(nodes)


# ---------------------------------------------------------------------------
# detection
# ---------------------------------------------------------------------------

def _integrated(profiles: GpuProfiles, gfx: str | None, name: str, reported: bool | None) -> bool | None:
    if reported is not None:
        return reported
    prof = profiles.get(gfx)
    if prof is not None:
        return prof.integrated
    if re.search(r"radeon(\(tm\))? graphics$|\b\d{3}m\b|\b\d{4}s\b", name.lower()):
        return True
    return None


def _from_hip_runtime(result: HipRuntimeResult, profiles: GpuProfiles) -> list[Gpu]:
    gpus = []
    for i, d in enumerate(result.devices):
        gfx = base_gfx(d.gcn_arch_name) if d.gcn_arch_name else profiles.gfx_for_name(d.name)
        gpus.append(Gpu(name=d.name, gfx=gfx, source="hip-runtime", hip_index=i,
                        target=d.gcn_arch_name or None,
                        integrated=_integrated(profiles, gfx, d.name, d.integrated)))
    return gpus


def gpus_from_hipinfo(text: str, profiles: GpuProfiles) -> list[Gpu]:
    gpus = []
    for d in parse_hipinfo(text):
        target = d.get("gcnArchName") or None
        name = d.get("Name", "")
        gfx = base_gfx(target) if target else profiles.gfx_for_name(name)
        reported = {"1": True, "0": False}.get(d.get("isIntegrated", ""))
        gpus.append(Gpu(name=name, gfx=gfx, source="hipinfo", target=target,
                        hip_index=int(d["device#"]),
                        integrated=_integrated(profiles, gfx, name, reported),
                        memory_gb=_memory_gb(d.get("totalGlobalMem"))))
    return gpus


def gpus_from_cim(text: str, profiles: GpuProfiles) -> list[Gpu]:
    gpus = []
    for row in parse_cim_json(text):
        if not is_amd_adapter(row):
            continue
        name = str(row.get("Name") or "").strip()
        _, dev = _pci_from_adapter(row)
        gfx = profiles.gfx_for_name(name) or (profiles.gfx_for_pci_id(dev) if dev else None)
        ram = row.get("AdapterRAM")
        mem = round(int(ram) / 2**30, 2) if isinstance(ram, (int, float)) and ram > 0 else None
        gpus.append(Gpu(name=name, gfx=gfx, source="cim", pci_id=dev,
                        integrated=_integrated(profiles, gfx, name, None),
                        memory_gb=mem, driver_version=str(row.get("DriverVersion") or "") or None))
    return gpus


def gpus_from_rocminfo(text: str, profiles: GpuProfiles) -> list[Gpu]:
    gpus: list[Gpu] = []
    for a in parse_rocminfo(text):
        if a.get("Device Type") != "GPU":
            continue
        target = a.get("Name") or None
        name = a.get("Marketing Name") or target or "AMD GPU"
        chip = re.search(r"\(0x([0-9a-fA-F]+)\)", a.get("Chip ID", ""))
        gpus.append(Gpu(name=name, gfx=base_gfx(target) if target else None, source="rocminfo", target=target,
                        hip_index=len(gpus), pci_id=chip.group(1).upper().zfill(4) if chip else None,
                        integrated=_integrated(profiles, base_gfx(target) if target else None, name, None)))
    return gpus


def _rocminfo_node_names(text: str) -> dict[int, str]:
    out = {}
    for a in parse_rocminfo(text):
        if a.get("Device Type") == "GPU" and a.get("Node", "").isdigit() and a.get("Marketing Name"):
            out[int(a["Node"])] = a["Marketing Name"]
    return out


def gpus_from_kfd(nodes: Sequence[tuple[int, dict[str, int]]], profiles: GpuProfiles,
                  names: dict[int, str] | None = None) -> list[Gpu]:
    gpus: list[Gpu] = []
    for node, props in nodes:
        gfx = gfx_from_target_version(props.get("gfx_target_version", 0))
        if gfx is None or props.get("simd_count", 0) == 0:
            continue
        if props.get("vendor_id", 4098) != 0x1002:
            continue
        dev = props.get("device_id")
        pci = f"{dev:04X}" if dev else None
        prof = profiles.get(gfx)
        name = (names or {}).get(node)
        if not name:
            name = f"AMD GPU ({gfx})" if prof is None or not prof.models else f"AMD {prof.models[0]} class ({gfx})"
            if prof is not None and pci and profiles.gfx_for_pci_id(pci) == gfx and prof.models:
                name = f"AMD {' / '.join(prof.models[:2])} ({gfx})"
        apu = True if props.get("cpu_cores_count", 0) > 0 else None
        gpus.append(Gpu(name=name, gfx=gfx, source="kfd", target=gfx, hip_index=len(gpus), pci_id=pci,
                        integrated=_integrated(profiles, gfx, name, apu)))
    return gpus


def _run(probes: Probes, argv: Sequence[str]) -> CommandResult:
    return probes.commands.run(argv)


def _first_existing(probes: Probes, candidates: Iterable[str]) -> str | None:
    for c in candidates:
        if probes.fs.is_file(c):
            return c
    return None


def detect_gpus(probes: Probes, profiles: GpuProfiles, hip: HipRuntimeResult | None,
                sdk_bins: Sequence[str] = ()) -> GpuDetection:
    """The machine's AMD GPUs; `hip` is the already-probed HIP runtime answer,
    `sdk_bins` the bin folders of the HIP SDKs found (for hipInfo/rocminfo)."""
    if probes.platform == "windows":
        return _windows_gpus(probes, profiles, hip, sdk_bins)
    return _linux_gpus(probes, profiles, sdk_bins)


def _windows_gpus(probes: Probes, profiles: GpuProfiles, hip: HipRuntimeResult | None,
                  sdk_bins: Sequence[str]) -> GpuDetection:
    """Windows: the HIP runtime's devices, else hipInfo's, else the display adapters CIM lists."""
    records: list[ProbeRecord] = []
    pm = pathmod(probes.platform)
    if hip is not None:
        if hip.library is None:
            records.append(ProbeRecord("hip-runtime", "not-found", hip.error or "no amdhip64 DLL could be loaded"))
        elif hip.error and not hip.devices:
            records.append(ProbeRecord("hip-runtime", "error", hip.error))
        else:
            gpus = _from_hip_runtime(hip, profiles)
            records.append(ProbeRecord("hip-runtime", "ok" if gpus else "empty",
                                       f"{hip.library}: {len(gpus)} device(s)"))
            if gpus:
                return GpuDetection(tuple(gpus), tuple(records))
    exe = _first_existing(probes, [pm.join(b, "hipInfo.exe") for b in sdk_bins]) or probes.commands.which("hipInfo")
    if exe is None:
        records.append(ProbeRecord("hipinfo", "not-found", "no hipInfo.exe (it comes with the HIP SDK)"))
    else:
        res = _run(probes, [exe])
        gpus = gpus_from_hipinfo(res.stdout, profiles) if res.stdout else []
        if gpus:
            records.append(ProbeRecord("hipinfo", "ok", f"{len(gpus)} device(s)"))
            return GpuDetection(tuple(gpus), tuple(records))
        detail = (res.error or _last_line(res.stdout + "\n" + res.stderr) or f"exit status {res.returncode}")
        records.append(ProbeRecord("hipinfo", "empty" if res.ok else "error", detail))
    shell = probes.commands.which("powershell") or probes.commands.which("pwsh")
    if shell is None:
        records.append(ProbeRecord("cim", "not-found", "no PowerShell"))
        return GpuDetection((), tuple(records))
    res = _run(probes, [shell, "-NoProfile", "-NonInteractive", "-Command", CIM_COMMAND])
    try:
        gpus = gpus_from_cim(res.stdout, profiles) if res.ok else []
    except ValueError as e:
        records.append(ProbeRecord("cim", "error", f"unreadable JSON: {e}"))
        return GpuDetection((), tuple(records))
    if not res.ok:
        records.append(ProbeRecord("cim", "error",
                                   res.error or _last_line(res.stderr) or f"exit status {res.returncode}"))
    else:
        unknown = [g.name for g in gpus if g.gfx is None]
        detail = f"{len(gpus)} AMD adapter(s)" + (f"; gfx unknown for {', '.join(unknown)}" if unknown else "")
        records.append(ProbeRecord("cim", "ok" if gpus else "empty", detail))
    return GpuDetection(tuple(gpus), tuple(records))



def _linux_gpus(probes: Probes, profiles: GpuProfiles, sdk_bins: Sequence[str]) -> GpuDetection:
    """Linux: the KFD topology's nodes (named by rocminfo), else rocminfo's agents, else rocm_agent_enumerator's."""
    records: list[ProbeRecord] = []
    pm = pathmod(probes.platform)
    nodes = read_kfd_nodes(probes)
    rocminfo = _first_existing(probes, [pm.join(b, "rocminfo") for b in sdk_bins]) or probes.commands.which("rocminfo")
    rocminfo_out: CommandResult | None = None
    if rocminfo is not None:
        rocminfo_out = _run(probes, [rocminfo])
    if nodes:
        names = _rocminfo_node_names(rocminfo_out.stdout) if rocminfo_out is not None and rocminfo_out.ok else {}
        gpus = gpus_from_kfd(nodes, profiles, names)
        records.append(ProbeRecord("kfd", "ok" if gpus else "empty",
                                   f"{len(nodes)} topology node(s), {len(gpus)} GPU(s)"))
        if rocminfo_out is not None:
            records.append(ProbeRecord("rocminfo", "ok" if rocminfo_out.ok else "error",
                                       "names matched by node" if names else (rocminfo_out.error or "no GPU agents")))
        if gpus:
            return GpuDetection(tuple(gpus), tuple(records))
    else:
        records.append(ProbeRecord("kfd", "not-found", f"no {KFD_NODES} (amdgpu/KFD not loaded)"))
        if rocminfo_out is not None:
            gpus = gpus_from_rocminfo(rocminfo_out.stdout, profiles) if rocminfo_out.ok else []
            records.append(ProbeRecord("rocminfo", "ok" if gpus else ("empty" if rocminfo_out.ok else "error"),
                                       f"{len(gpus)} GPU agent(s)" if rocminfo_out.ok else
                                       (rocminfo_out.error or _last_line(rocminfo_out.stderr))))
            if gpus:
                return GpuDetection(tuple(gpus), tuple(records))
    if rocminfo is None:
        records.append(ProbeRecord("rocminfo", "not-found", "rocminfo is not installed"))
    enum = _first_existing(probes, [pm.join(b, "rocm_agent_enumerator") for b in sdk_bins]) \
        or probes.commands.which("rocm_agent_enumerator")
    if enum is None:
        records.append(ProbeRecord("rocm_agent_enumerator", "not-found", "not installed"))
        return GpuDetection((), tuple(records))
    res = _run(probes, [enum])
    targets = parse_agent_enumerator(res.stdout) if res.ok else []
    gpus = [Gpu(name=f"AMD GPU ({t})", gfx=base_gfx(t), source="rocm_agent_enumerator", target=t, hip_index=i,
                integrated=_integrated(profiles, base_gfx(t), "", None)) for i, t in enumerate(targets)]
    records.append(ProbeRecord("rocm_agent_enumerator", "ok" if gpus else ("empty" if res.ok else "error"),
                               f"{len(gpus)} GPU target(s)"))
    return GpuDetection(tuple(gpus), tuple(records))


def _last_line(text: str) -> str:
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    return lines[-1][:200] if lines else ""


def select_gpu(gpus: Sequence[Gpu], profiles: GpuProfiles, visible: str | None = None) -> int | None:
    """Index (into `gpus`) of the GPU a ZLUDA app would use / should use.

    When HIP_VISIBLE_DEVICES (`visible`) is set and the GPUs carry HIP indices,
    apps see its first listed device: that one. Otherwise the best candidate:
    discrete and ZLUDA-capable, then discrete, then ZLUDA-capable, then the first."""
    if not gpus:
        return None
    if visible:
        first = visible.split(",")[0].strip()
        if first.isdigit():
            for i, g in enumerate(gpus):
                if g.hip_index == int(first):
                    return i

    def rank(item: tuple[int, Gpu]) -> tuple:
        i, g = item
        capable = bool(zluda_capable(profiles, g.gfx))
        return (g.integrated is not True and capable, g.integrated is not True, capable,
                g.memory_gb or 0, -i)

    return max(enumerate(gpus), key=rank)[0]
