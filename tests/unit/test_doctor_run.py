"""`doctor --run` where no probe can start (no CUDA driver to load): one line, after the verdict."""
from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest


@pytest.mark.skipif(sys.platform == "win32" or ctypes.util.find_library("cuda") is not None,
                    reason="needs a machine without a CUDA driver")
def test_probes_that_all_stop_at_the_driver_are_one_line_after_the_verdict():
    done = subprocess.run([sys.executable, "-m", "cuda4amd", "doctor", "--run"], capture_output=True, text=True,
                          timeout=600, env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""})
    lines = (done.stdout + done.stderr).splitlines()
    skipped = [line for line in lines if line.startswith("probes skipped: cannot load the CUDA driver")]
    assert len(skipped) == 1 and lines[-1] == skipped[0]
    assert not any(line.startswith("probe ") for line in lines)
    assert skipped[0].count("libcuda.so.1") == 1  # the library named once, not as dlopen's text repeats it
