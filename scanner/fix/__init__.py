"""`cuda4amd scan --fix`, `cuda4amd run`, `cuda4amd undo`: link ZLUDA safely and reversibly.

    plan ── make_plan(result, ...)        the green-lit set → actions (sources, destinations, hashes)
    release / archive                     pinned archives, HTTPS download with resume, safe extraction
    journal ── apply_plan / undo_target   atomic journal, backups, byte-for-byte undo
    launchers                             .cmd / .ps1 / .sh that run the app through ZLUDA
    verify                                re-scan: every redirected dependency → the release's file
    commands ── fix_target, run, undo     what the CLI calls

See docs/fix.md. Importing this package costs nothing: each module imports
what it needs, and `commands` keeps click as its only import at load time.
"""
