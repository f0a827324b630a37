#!/usr/bin/env python3
"""GPU truth harness: run framework workloads on an NVIDIA GPU and check the scan against them.

    python tools/gpu_truth/run.py --site /opt/torch/.venv/lib/python3.12/site-packages --out OUT

For every operation of tools/gpu_truth/workloads.py, in its own process:
once normally and once with CUDA_FORCE_PTX_JIT=1 (the driver ignores SASS
and must JIT PTX: the closest an NVIDIA machine comes to ZLUDA, which runs
PTX only); the libraries each mapped are read from /proc/self/maps. At the
same time `cuda4amd scan SITE --format json --host none` scans the same
site-packages. Writes OUT/gpu-truth.json (probes, scan summary, comparison)
and OUT/gpu-truth.md, and prints the markdown.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from compare import compare, markdown, rules_family_of  # noqa: E402
from probe import PROBE_MARK  # noqa: E402
from workloads import OPERATIONS  # noqa: E402

MODES = {"normal": {}, "ptx-jit": {"CUDA_FORCE_PTX_JIT": "1"}}
#: keep JAX from taking most of the GPU while other probes run beside it
QUIET_ENV = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TF_CPP_MIN_LOG_LEVEL": "2",
             "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def run_probe(op: str, mode: str, timeout: float, cache: Path) -> dict:
    env = dict(os.environ, **QUIET_ENV, **MODES[mode])
    # separate kernel caches per mode, so a PTX-JIT run never reuses cubins built normally
    env["TRITON_CACHE_DIR"] = str(cache / mode / "triton")
    env["CUPY_CACHE_DIR"] = str(cache / mode / "cupy")
    env["CUDA_CACHE_PATH"] = str(cache / mode / "nv")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache / mode / "inductor")
    start = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, str(HERE / "probe.py"), op], capture_output=True, text=True,
                              timeout=timeout, env=env)
        out, err, rc = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err, rc = f"timed out after {timeout:.0f} s", None
    for line in reversed(out.splitlines()):
        if line.startswith(PROBE_MARK):
            result = json.loads(line[len(PROBE_MARK):])
            break
    else:
        tail = (err or "").strip().splitlines()[-3:]
        result = {"op": op, "ok": False, "stage": "process", "maps": [], "maps_before": [],
                  "error": f"exit {rc}: " + " / ".join(tail)[:600]}
    result["mode"] = mode
    result["wall"] = round(time.perf_counter() - start, 2)
    return result


def scan(site: str, out: Path) -> tuple[dict, float]:
    start = time.perf_counter()
    path = out / "scan.json"
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "scan", site, "--format", "json", "--host", "none",
                           "-o", str(path)], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if not path.exists():
        raise SystemExit(f"the scan wrote no report (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(path.read_text()), seconds


def machine() -> dict:
    meta = {"date": datetime.date.today().isoformat(), "machine": platform.platform(),
            "python": platform.python_version()}
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        name, driver, cap = (s.strip() for s in smi.stdout.splitlines()[0].split(","))
        meta.update(gpu=f"{name} (compute {cap})", driver=driver, compute=cap)
    except (OSError, IndexError, ValueError, subprocess.SubprocessError):
        pass
    return meta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--site", required=True, help="the site-packages folder the workloads import from")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--jobs", type=int, default=4, help="probes at a time (default 4)")
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per probe")
    parser.add_argument("--ops", nargs="*", help="only these operations (default: all)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    ops = args.ops or list(OPERATIONS)
    cache = Path(os.environ.get("TMPDIR", "/tmp")) / "gpu-truth-cache"

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs + 1) as pool:
        scanned = pool.submit(scan, args.site, args.out)
        futures = [pool.submit(run_probe, op, mode, args.timeout, cache) for op in ops for mode in MODES]
        probes = []
        for future in concurrent.futures.as_completed(futures):
            result = future.result()
            probes.append(result)
            print(f"{result['op']:22s} {result['mode']:8s} {'ok' if result['ok'] else 'FAIL'} "
                  f"{result['wall']:6.1f}s {result.get('error') or ''}"[:200], flush=True)
        report, scan_seconds = scanned.result()

    family_of = rules_family_of()
    meta = machine()
    meta.update(site=args.site, scan_seconds=round(scan_seconds, 1), cuda4amd=report.get("tool", {}).get("version"))
    arch = int(meta.get("compute", "9.0").replace(".", "")) if meta.get("compute") else 90
    summary = compare(sorted(probes, key=lambda p: (p["op"], p["mode"])), report, args.site, family_of, gpu_arch=arch)
    scan_packages = [{k: p.get(k) for k in ("name", "version", "verdict", "reasons", "advice", "generators")}
                     for p in report.get("packages", [])]
    document = {"meta": meta, "summary": summary, "probes": probes, "scan_packages": scan_packages}
    (args.out / "gpu-truth.json").write_text(json.dumps(document, indent=1, sort_keys=True))
    text = markdown(summary, meta)
    (args.out / "gpu-truth.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
