"""The census: many artifacts (wheels) scanned at once, on Dask distributed, into one matrix and a page.

* :mod:`cuda4amd.census.plan`: specs (wheel files, folders of wheels, requirements files, ``name==version``)
  → artifacts, each with its sha256;
* :mod:`cuda4amd.census.task`: one task, a pure function of (artifact sha256, ZLUDA release, rules version):
  ``run_scan`` on the artifact, the report written atomically under its content address;
* :mod:`cuda4amd.census.run`: the tasks on a Dask cluster (a LocalCluster, or ``--scheduler``), resumable;
* :mod:`cuda4amd.census.outputs` and :mod:`cuda4amd.census.page`: the matrix (cuda4amd.evidence.matrix)
  and a static HTML page.

Dask is an optional dependency (the ``census`` extra); only :mod:`cuda4amd.census.run` imports it, inside
the function that runs the tasks, so the rest of the package (and ``cuda4amd --help``) never loads it.
"""
from __future__ import annotations
