"""`cuda4amd scan --fix`, `cuda4amd run`, `cuda4amd undo`: link ZLUDA safely and reversibly.

The stages, in the order a fix runs them (docs/fix.md):

    plan/ ── make_plan(result, ...)       the green-lit set → actions (sources, destinations, hashes)
    release / archive                     pinned archives, HTTPS download with resume, safe extraction
    apply ── fix_target / apply_plan      scan --fix end to end (under the lock); each change journaled
    verify ── verify / after_report       re-scan: every redirected dependency → the release's file
    undo ── undo_target                   byte-for-byte undo from the journal (under the lock)

and what they share: `journal` (the journal's format: read, write, check),
`fileops` (every disk write, confined to the target), `launchers` (.cmd /
.ps1 / .sh), `lock` (one fix, undo or run per target), `state` (the journal
key), `run` (`cuda4amd run`: a program with the fix's environment).

Importing this package costs nothing: each module imports what it needs.
"""
