"""The read stage: one binary's bytes → `BinaryInfo` and its payload.

    engine       sniffing, the fast/lief dispatch, mapping a file
    binview      bounds-checked views over the bytes
    pe, elf      the fast readers; lief_reader the reference reader
    fatbin       fat binary containers (SASS/PTX per kernel module)
    byname       library names loaded at run time
    payload      kernels + by-name analysis for one binary
"""
