#!/usr/bin/env python3
"""steps.py: the decode steps in run.sh's NCU_T log (ncu-t.log).

Splits the launches at each embed_bf16 (a step's first kernel), prints
every step's kernel count and summed duration, then the kernels of step
N (argument 2, default 2: a graph replay) with their durations, summed by
name. Usage: steps.py ncu-t.log [N] (or the log's CSV lines, gzipped: .gz)
"""
import csv
import gzip
import sys
from collections import OrderedDict

rows = []
with (gzip.open if sys.argv[1].endswith(".gz") else open)(sys.argv[1], "rt") as f:
    for r in csv.reader(l for l in f if l.startswith('"')):
        if len(r) < 15 or r[12] != "gpu__time_duration.sum":
            continue
        rows.append((r[4], r[6], r[8], float(r[14].replace(",", "")) / 1e3))
steps = []
for r in rows:
    if r[0] == "embed_bf16" or not steps:
        steps.append([])
    steps[-1].append(r)
for i, s in enumerate(steps):
    print(f"step {i}: {len(s)} kernels, {sum(r[3] for r in s):.1f} us")
n = int(sys.argv[2]) if len(sys.argv) > 2 else 2
s = steps[n]
by = OrderedDict()
for name, stream, grid, us in s:
    c, t = by.get(name, (0, 0.0))
    by[name] = (c + 1, t + us)
print(f"step {n} by kernel:")
for name, (c, t) in sorted(by.items(), key=lambda kv: -kv[1][1]):
    print(f"  {name:32s} {c:3d} {t:8.1f} us")
print(f"step {n} in order:")
for i, (name, stream, grid, us) in enumerate(s):
    print(f"  {i:3d} {name:32s} stream {stream:>3s} grid {grid:14s} {us:7.1f} us")
