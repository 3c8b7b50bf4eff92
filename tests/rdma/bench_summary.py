#!/usr/bin/env python3
"""Medians of tests/rdma/bench_in_vm.sh output: one markdown row per run label, then the
per-round ratios of gw-perf over perftest (same round) and their median.

bw rows: BW average [MB/s] (4th column); lat rows: t_typical [usec] (5th column), the same
columns for perftest and gw-perf; floors: t_min [usec] (3rd column). Also reads the output of
crossover_in_vm.sh (rendezvous / eager per size). Usage: bench_summary.py LOG
"""
import re
import statistics
import sys

values = {}  # label -> {round: value}
floors = {}  # lat label -> {round: t_min}
order = []
rnd = 0
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if line.startswith("## round"):
        rnd = int(line.split()[2])
        continue
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
        values[label] = {}
        order.append(label)
    values[label][rnd] = float(cols[idx])
    if lat:
        floors.setdefault(label, {})[rnd] = float(cols[2])

print("| run | median | rounds |")
print("|---|---|---|")
for label in order:
    v = list(values[label].values())
    print(f"| `{label}` | {statistics.median(v):.2f} | {', '.join(f'{x:.2f}' for x in v)} |")


def rows(prefix, size):
    return [l for l in order if l.startswith(prefix) and f"-s {size} " in l + " "]


def first(labels, busy):
    return next((l for l in labels if l.endswith("--busy") == busy), None)


# (measure, gw-perf label, perftest label)
pairs = []
for size in ("4096", "65536", "1048576"):
    ref = first(rows("ib_write_bw", size), False)
    gw = rows("gw-perf -t rdma:dev=rxe0 bw", size)
    pairs.append((f"bw {size} B / ib_write_bw, blocking", first(gw, False), ref))
    pairs.append((f"bw {size} B / ib_write_bw, `--busy`", first(gw, True), ref))
for size in ("2", "4096"):
    pairs.append((f"lat {size} B / ib_send_lat, `--busy` (t_typical)",
                  first(rows("gw-perf -t rdma:dev=rxe0 lat", size), True),
                  first(rows("ib_send_lat", size), False)))
# crossover_in_vm.sh: rendezvous against eager at each size (lat > 1 and bw < 1: eager wins).
for size in sorted({int(l.split(" -s ")[1].split()[0]) for l in order if " eager " in l}):
    for test in ("lat", "bw"):
        pairs.append((f"{test} {size} B rendezvous / eager",
                      first(rows(f"gw-perf rendezvous {test}", size), test == "lat"),
                      first(rows(f"gw-perf eager {test}", size), test == "lat")))

print()
print("| measure | rounds | median |")
print("|---|---|---:|")
for name, gw, ref in pairs:
    if not gw or not ref:
        continue
    rounds = sorted(set(values[gw]) & set(values[ref]))
    ratios = [values[gw][r] / values[ref][r] for r in rounds]
    if ratios:
        print(f"| {name} | {' '.join(f'{x:.2f}' for x in ratios)} | "
              f"{statistics.median(ratios):.2f}× |")
for name, gw, ref in pairs:
    if gw in floors and ref in floors:
        g, p = statistics.median(floors[gw].values()), statistics.median(floors[ref].values())
        print(f"\nfloor ({name.split(',')[0]}): median t_min {g:.2f} µs against {p:.2f} "
              f"({g / p:.2f}×)")
