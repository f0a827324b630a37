"""Evidence after the fix: smoke probes run through the linked libraries
(probes/, runner, record), the evidence level each claim reaches (levels),
and the compatibility matrix folded from many reports (matrix).

See docs/evidence.md.
"""
