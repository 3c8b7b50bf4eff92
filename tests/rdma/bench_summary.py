#!/usr/bin/env python3
"""Medians of tests/rdma/bench_in_vm.sh output: one markdown row per run label.

bw rows: BW average [MB/s] (4th column); lat rows: t_typical [usec] (5th column), the same
columns for perftest and gw-perf. Usage: bench_summary.py LOG
"""
import re
import statistics
import sys

values = {}
order = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    m = re.match(r"^(ib_\w+|gw-perf) (.*?): +(\d.*)$", line.rstrip())
    if not m:
        continue
    label = f"{m.group(1)} {m.group(2)}"
    cols = m.group(3).split()
    lat = "lat" in label.split(" -s")[0]
    idx = 4 if lat else 3
    if len(cols) <= idx:
        continue
    if label not in values:
        values[label] = []
        order.append(label)
    values[label].append(float(cols[idx]))

print("| run | median | rounds |")
print("|---|---|---|")
for label in order:
    v = values[label]
    print(f"| `{label}` | {statistics.median(v):.2f} | {', '.join(f'{x:.2f}' for x in v)} |")
