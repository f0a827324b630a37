"""Peak memory of a cold scan (after drop_caches), with tools/bench.py's sampler: python coldmem.py TREE CODE..."""
import os, subprocess, sys
sys.path.insert(0, "tools")
import bench
tree, codes = sys.argv[1], sys.argv[2:]
for round_ in range(2):
    for code in codes:
        subprocess.run(["sync"]); open("/proc/sys/vm/drop_caches", "w").write("3\n")
        env = {**os.environ, "PYTHONPATH": code + os.pathsep + os.environ.get("PYTHONPATH", "")}
        print(code, "cold:", bench.memory([sys.executable, "-m", "cuda4amd", "scan", tree, "--format", "json", "--no-cache"], env), flush=True)
        print(code, "warm:", bench.memory([sys.executable, "-m", "cuda4amd", "scan", tree, "--format", "json", "--no-cache"], env), flush=True)
