"""The fix plan: the green-lit set of a scan → actions (sources, destinations, hashes), as data.

    model          the plan's data (Plan, Action, EnvVar), the `.cuda4amd/` paths, the plan as text
    make           make_plan(result, ...): the steps below, in order
    host_gate      a host that cannot run ZLUDA (in this mode) is refused; families it cannot serve
    green_lit      which binaries run through ZLUDA and which of their dependencies are linked
    release_files  the release files the plan takes
    environment    HIP_PATH, PATH / LD_LIBRARY_PATH, LD_AUDIT, framework switches
    placements     the actions of each mode: launcher (store + launchers) or place (next to the binaries)

Importing the package costs nothing: each module imports what it needs.
"""
