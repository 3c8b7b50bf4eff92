#!/usr/bin/env python3
"""Summary of tests/rdma/lat_ab_in_vm.sh output: per size and run label, the medians of
t_typical and t_min over the rounds, and the per-round ratios to ib_send_lat's in the same
round (t_typical, and t_min: the floor) with their medians. With an A/A run (GW_LAT_AA=1)
the reference of a round is the geometric mean of its two ib_send_lat runs, one before and one
after the builds: the position in a round alone moves a run by up to 1.2x. Several LOGs (one
per VM boot) are pooled: a round is (log, round number). Usage: lat_ab_summary.py LOG...
"""
import re
import statistics
import sys

rows = {}  # (size, label) -> {(log, round): (t_min, t_typical)}
for n, path in enumerate(sys.argv[1:]):
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"r(\d+) (\S+) (\d+): +(.*)", line)
        if not m:
            continue
        f = m.group(4).split()
        if len(f) < 5:
            continue
        rows.setdefault((int(m.group(3)), m.group(2)), {})[(n, int(m.group(1)))] = (
            float(f[2]), float(f[4]))
for size in sorted({k[0] for k in rows}):
    ref = rows.get((size, "ib_send_lat"), {})
    aa = rows.get((size, "ib_send_lat#2"), {})
    if aa:
        ref = {r: ((ref[r][0] * aa[r][0]) ** 0.5, (ref[r][1] * aa[r][1]) ** 0.5)
               for r in ref if r in aa}
    for (s, label), v in rows.items():
        if s != size:
            continue
        rounds = sorted(r for r in v if r in ref)
        if not rounds:
            continue
        typ = [v[r][1] / ref[r][1] for r in rounds]
        low = [v[r][0] / ref[r][0] for r in rounds]
        print(f"{size:5} B {label:30} t_typical {statistics.median(v[r][1] for r in rounds):7.2f}"
              f"  t_min {statistics.median(v[r][0] for r in rounds):7.2f}"
              f"  ratio median {statistics.median(typ):.2f}x (t_min {statistics.median(low):.2f}x)"
              f"  n={len(rounds)}  [{' '.join(f'{x:.2f}' for x in typ)}]")
