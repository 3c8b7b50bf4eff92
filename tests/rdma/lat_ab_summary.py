#!/usr/bin/env python3
"""Summary of tests/rdma/lat_ab_in_vm.sh output: per size and run label, the medians of
t_typical and t_min over the rounds, and the per-round ratios to ib_send_lat's in the same
round (t_typical, and t_min: the floor) with their medians. With an A/A run (GW_LAT_AA=1)
the reference of a round is the geometric mean of its two ib_send_lat runs, one before and one
after the builds: the position in a round alone moves a run by up to 1.2x. Several LOGs (one
per VM boot) are pooled: a round is (log, round number).

Two more lines per label say what the noise allows (docs/bench-rdma.md, "Latency: the bracketed A/A method"):
- ci: a bootstrap 95 % interval (rounds resampled, fixed seed) of the median ratio;
- q10: the 10th percentile of t_typical over the rounds against the reference runs' own
  10th percentile, with its bootstrap interval. Under TCG a whole run is either fast or up to
  2x slow, for perftest as for gradwire; q10 compares the two in the VM's fast state.
Usage: lat_ab_summary.py LOG...
"""
import random
import re
import statistics
import sys

BOOT = 4000


def p10(xs):
    """10th percentile, interpolated between order statistics."""
    return statistics.quantiles(xs, n=10, method="inclusive")[0]


def interval(stat, rounds):
    """Bootstrap 95 % interval of stat(sample of rounds)."""
    rng = random.Random(1)
    vals = sorted(stat(rng.choices(rounds, k=len(rounds))) for _ in range(BOOT))
    return vals[int(0.025 * BOOT)], vals[int(0.975 * BOOT) - 1]


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
    first = rows.get((size, "ib_send_lat"), {})
    aa = rows.get((size, "ib_send_lat#2"), {})
    ref = first
    if aa:
        ref = {r: ((first[r][0] * aa[r][0]) ** 0.5, (first[r][1] * aa[r][1]) ** 0.5)
               for r in first if r in aa}
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
        if label.startswith("ib_send_lat") or len(rounds) < 5:
            continue
        lo, hi = interval(statistics.median, typ)

        # Reference runs of a round: both ib_send_lat runs with an A/A run, else the one.
        def q10(sample):
            mine = [v[r][1] for r in sample]
            theirs = [x[r][1] for r in sample for x in (first, aa) if r in x]
            return p10(mine) / p10(theirs)

        qlo, qhi = interval(q10, rounds)
        print(f"{'':8}{label:30} ci: median ratio 95% [{lo:.2f}, {hi:.2f}]   q10: t_typical "
              f"{p10([v[r][1] for r in rounds]):.2f} us, ratio {q10(rounds):.2f}x "
              f"95% [{qlo:.2f}, {qhi:.2f}]")
