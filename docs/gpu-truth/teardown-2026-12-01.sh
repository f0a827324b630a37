# Harness behind the teardown figures of docs/performance.md (2026-12-01, 22:33): the time from a scan
# command's end (its SystemExit) to the end of its process, as it was and with gc.freeze() first, 15 rounds
# alternating. Kept as the provenance of those figures, not a tool.
#     CUDA4AMD_FACTS_CACHE=DIR bash teardown-2026-12-01.sh PYTHON TREE
V=$1; TREE=$2
cat > /tmp/endtime4.py <<'PY'
import sys, time, os, gc
sys.argv = ["cuda4amd"] + sys.argv[1:]
from cuda4amd.cli import main
try:
    main()
except SystemExit as e:
    sys.stdout.flush()
    if os.environ.get("MODE") == "freeze": gc.freeze()
    sys.stderr.write(f"{time.time()}\n"); sys.stderr.flush()
    raise
PY
for r in $(seq 15); do for m in none freeze; do
  MODE=$m $V /tmp/endtime4.py scan "$TREE" --format json 2>/tmp/td4.err >/dev/null; E=$(date +%s.%N)
  echo "$m $(python3 -c "import sys; print(round((float(sys.argv[1]) - float(open('/tmp/td4.err').read().split()[-1]))*1000, 1))" $E)"
done; done | python3 -c "
import statistics as s, sys
d={}
for l in sys.stdin: k,v=l.split(); d.setdefault(k,[]).append(float(v))
for k,v in d.items(): print(' ', k, 'teardown median', s.median(v), 'ms, min', min(v))"
