"""The smoke probes: one module per family, each a program of its own (see common)."""
