#!/usr/bin/env python3
"""Summary of tests/rdma/lat_ab_in_vm.sh output: per size and run label, the medians of
t_typical and t_min over the rounds, and the per-round ratios of t_typical to ib_send_lat's
in the same round with their median. Usage: lat_ab_summary.py LOG
"""
import re
import statistics
import sys

rows = {}  # (size, label) -> {round: (t_min, t_typical)}
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    m = re.match(r"r(\d+) (\S+) (\d+): +(.*)", line)
    if not m:
        continue
    f = m.group(4).split()
    if len(f) < 5:
        continue
    rows.setdefault((int(m.group(3)), m.group(2)), {})[int(m.group(1))] = (float(f[2]),
                                                                           float(f[4]))
for size in sorted({k[0] for k in rows}):
    ref = rows.get((size, "ib_send_lat"), {})
    for (s, label), v in rows.items():
        if s != size:
            continue
        rounds = sorted(v)
        ratios = [v[r][1] / ref[r][1] for r in rounds if r in ref]
        print(f"{size:5} B {label:30} t_typical {statistics.median(v[r][1] for r in rounds):7.2f}"
              f"  t_min {statistics.median(v[r][0] for r in rounds):7.2f}"
              f"  ratio median {statistics.median(ratios):.2f}x"
              f"  [{' '.join(f'{x:.2f}' for x in ratios)}]")
