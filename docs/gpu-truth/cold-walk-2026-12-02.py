"""The prototype behind cold-walk-device-2026-12-02-0150.txt (docs/performance.md, 2026-12-02 "a cold scan reads
what it needs"): one binary's fat binary walk after drop_caches (root), plain and with its container and entry
headers asked for ahead a round at a time (MADV_WILLNEED), container starts from the PE/ELF wrapper records.
What became fatbin._Scan._ask_ahead; kept as the provenance of those figures, not a tool.

    python cold-walk-2026-12-02.py BINARY plain wave plain wave
"""
import mmap, os, struct, sys, time, resource, subprocess

from cuda4amd.scan.read.engine import mapped, read_buffer
from cuda4amd.scan.read import fatbin
MAGIC = struct.pack("<I", 0xBA55ED50)
CONT = struct.Struct("<IHHQ")
ENTRY = struct.Struct("<HHIQ")
P = mmap.PAGESIZE

def faults(): return resource.getrusage(resource.RUSAGE_SELF).ru_majflt
def drop():
    subprocess.run(["sync"]); open("/proc/sys/vm/drop_caches","w").write("3\n")

def willneed(buf, offs):
    pages = sorted({o - o % P for o in offs})
    # merge runs of adjacent pages
    i = 0
    n = 0
    while i < len(pages):
        j = i
        while j + 1 < len(pages) and pages[j+1] == pages[j] + P: j += 1
        buf.madvise(mmap.MADV_WILLNEED, pages[i], pages[j] - pages[i] + P); n += 1
        i = j + 1
    return n

def hints(buf, info):
    # container starts from PE wrapper records (.nvFatBi), ImageBase + RVA
    size = len(buf)
    base = fatbin._image_base(buf, size) if info.format == "PE" else 0
    secs = [s for s in info.sections if s.virtual_address and s.file_size > 0]
    out = []
    for w in info.sections:
        if w.name not in fatbin.WRAPPER_SECTIONS: continue
        ws, we = w.file_offset, w.file_offset + w.file_size
        for hit in range(ws, we - 23, 4):
            if buf[hit:hit+4] != struct.pack("<I", 0x466243B1): continue
            (t,) = struct.unpack_from("<Q", buf, hit + 8)
            rva = t - base
            for s in secs:
                if s.virtual_address <= rva < s.virtual_address + s.file_size:
                    out.append(s.file_offset + rva - s.virtual_address)
    return out

def prefetch(buf, info):
    h = hints(buf, info)
    calls = willneed(buf, h)
    frontier = []
    for off in h:
        if buf[off:off+4] != MAGIC: continue
        _, _, hs, sz = CONT.unpack_from(buf, off)
        frontier.append((off + hs, off + hs + sz))
    waves = 0
    while frontier:
        calls += willneed(buf, [e for e, _ in frontier] + [e + 0x7f for e, _ in frontier])
        nxt = []
        for e, stop in frontier:
            if e + 64 > stop: continue
            _, _, ehs, psize = ENTRY.unpack_from(buf, e)
            n = e + ehs + psize
            if n < stop: nxt.append((n, stop))
        frontier = nxt; waves += 1
    return len(h), waves, calls

path = sys.argv[1]
for variant in sys.argv[2:]:
    drop()
    t = time.perf_counter(); f0 = faults()
    with mapped(path) as buf:
        info = read_buffer(buf, "fast", None, exports=False)
        t1 = time.perf_counter()
        extra = prefetch(buf, info) if variant == "wave" else None
        t2 = time.perf_counter()
        r = fatbin.analyse_kernels(buf, info, deep=True)
        t3 = time.perf_counter()
    print(f"{variant}: headers {t1-t:.3f} prefetch {t2-t1:.3f} {extra} kernels {t3-t2:.3f} total {t3-t:.3f} s, faults {faults()-f0}, entries {len(r.entries)}")
