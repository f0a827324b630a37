#!/bin/bash
# The NVIDIA evidence run (docs/evidence.md): the smoke probes, unchanged, against NVIDIA's libraries.
# Run from a folder holding the package as cuda4amd/ (how it ran on the device: .dev-h6/{run.sh,cuda4amd/}),
# or as tools/evidence_nvidia.sh in a checkout (the package folder scanner/ is linked as cuda4amd/ in a temp dir).
# Writes $OUT/nvidia-h200-probes{,-2}.json and .log ($OUT defaults to the current folder).
set -u
OUT=${OUT:-$PWD}
cd "$(dirname "$0")"
if [ ! -d cuda4amd ] && [ -d ../scanner ]; then
  PKG=$(mktemp -d); ln -s "$(cd ../scanner && pwd)" "$PKG/cuda4amd"; cd "$PKG"
fi
PY=/opt/torch/.venv/bin/python3
[ -x "$PY" ] || PY=python3
SITE=$($PY -c 'import site,sys; print(site.getsitepackages()[0])')
LIBDIRS=$(find "$SITE/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
export LD_LIBRARY_PATH="${LIBDIRS}${LD_LIBRARY_PATH:-}"
export PYTHONPATH="$PWD"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  echo "python: $PY ($($PY -V 2>&1))"
  echo "nvidia wheels:"; $PY -m pip list 2>/dev/null | grep -Ei '^nvidia-(cublas|cusparse|cudnn|cufft|cuda-runtime)' 
  echo "library folders: $LIBDIRS"
  for n in libcublas.so.13 libcublasLt.so.13 libcusparse.so.12 libcudnn.so.9 libcufft.so.12; do
    echo "$n -> $(find "$SITE/nvidia" -name "$n" | head -1)"; done
  echo "ptxas check of vector_add.ptx:"; (ptxas -arch=sm_90 cuda4amd/evidence/probes/vector_add.ptx -o /tmp/va.cubin && echo ok) 2>&1
  echo "--- probes (python -m cuda4amd.evidence) ---"
  $PY -m cuda4amd.evidence --through "nvidia" --json "$OUT/nvidia-h200-probes.json"
  echo "--- the same, second run (warm) ---"
  $PY -m cuda4amd.evidence --through "nvidia" --json "$OUT/nvidia-h200-probes-2.json"
  echo "--- forced refusal: cuFFT probe against a library without cuFFT (libcublas) ---"
  $PY -m cuda4amd.evidence.probes.fft --library libcublas.so.13
} 2>&1 | tee "$OUT/nvidia-h200-probes.log"
