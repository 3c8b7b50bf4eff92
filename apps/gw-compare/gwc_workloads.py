"""The workloads, the gw-perf / gw-coll-perf runs that measure them, and how each printed row
becomes a sample: speed from the tool's own row, cost from the counters between rows.

One process pair measures several workloads: its rows come line-buffered (stdbuf -oL), the
counters are read at every line, and a workload's window runs from the line before its row
(the column heads for the first one, after setup) to its row. A window holds the workload's
warm-up and timed phase, so messages = warm-up + timed iterations (warm-up counts as gw-perf
and gw-coll-perf compute them by default).
"""
KIB, MIB = 1024, 1024 * 1024


class Workload:
    def __init__(self, wid, label, kind, size, unit, better):
        self.id, self.label, self.kind, self.size = wid, label, kind, size
        self.unit, self.better = unit, better  # better: "low" or "high"


WORKLOADS = [
    Workload("lat_64", "ping-pong 64 B", "lat", 64, "us", "low"),
    Workload("lat_4k", "ping-pong 4 KiB", "lat", 4 * KIB, "us", "low"),
    Workload("lat_64k", "ping-pong 64 KiB", "lat", 64 * KIB, "us", "low"),
    Workload("bw_4k", "bandwidth 4 KiB", "bw", 4 * KIB, "Gbit/s", "high"),
    Workload("bw_64k", "bandwidth 64 KiB", "bw", 64 * KIB, "Gbit/s", "high"),
    Workload("bw_1m", "bandwidth 1 MiB", "bw", MIB, "Gbit/s", "high"),
    Workload("bw_8m", "bandwidth 8 MiB", "bw", 8 * MIB, "Gbit/s", "high"),
    Workload("rate_64", "msg rate 64 B", "rate", 64, "Mmsg/s", "high"),
    Workload("ar_4k", "allreduce 4 KiB", "coll", 4 * KIB, "us", "low"),
    Workload("ar_1m", "allreduce 1 MiB", "coll", MIB, "us", "low"),
    Workload("ar_64m", "allreduce 64 MiB", "coll", 64 * MIB, "us", "low"),
    # Both ranks compute (no call) while their progress threads serve the peers: the CPU they
    # take meanwhile, both ranks together (issue 39: <= 2 % of a core per rank).
    Workload("idle", "idle ranks' CPU", "idle", 4 * KIB, "% core", "low"),
]
BY_ID = {w.id: w for w in WORKLOADS}
LAT_WARMUP_MAX, WARMUP_BYTES = 100, 64 * MIB


def coll_warmup(size):
    """gw-coll-perf -w: 5 as its default, 2 for sizes that take a large share of a second."""
    return 5 if size < 16 * MIB else 2
COLL_GUESS_US = {4 * KIB: 300, MIB: 3000, 64 * MIB: 150000}  # round 1: slow on purpose


def size_text(n):
    return "%dM" % (n // MIB) if n >= MIB else ("%dK" % (n // KIB) if n >= KIB else str(n))


class Run:
    """One process pair: the tool, its arguments, and the workload id of each row in order
    (None: a row that is not kept)."""

    def __init__(self, tool, args, rows):
        self.tool, self.args, self.rows = tool, args, rows


def plan(duration_s, selected, est=None):
    """The runs of one round for one transport, covering the `selected` workload ids;
    `est`: {workload id: us per allreduce} measured on this transport so far."""
    runs = []
    d = "%g" % duration_s
    lat = [w for w in WORKLOADS if w.kind == "lat" and w.id in selected]
    # The first size runs twice and its first row is not kept: a connection's first messages
    # are slow (over memif the first round trip took ~20 ms here), not the steady state.
    if lat:
        runs.append(Run("perf", ["--test", "lat", "-D", d, "-s",
                                 ",".join(size_text(w.size) for w in lat[:1] + lat)],
                        [None] + [w.id for w in lat]))
    bw = [w for w in WORKLOADS if w.kind in ("rate", "bw") and w.id in selected]
    bw.sort(key=lambda w: w.size)
    if bw:
        runs.append(Run("perf", ["--test", "bw", "-D", d, "-s",
                                 ",".join(size_text(w.size) for w in bw[:1] + bw)],
                        [None] + [w.id for w in bw]))
    # Allreduce: one run per size (gw-coll-perf takes one -n), as many iterations as fit in
    # duration_s at the pace `est` (us per op: the last round's, else a guess). A smaller size
    # first (-b B -f S/B) takes the connection's first messages; its row is not kept.
    for w in WORKLOADS:
        if w.kind == "coll" and w.id in selected:
            us = (est or {}).get(w.id) or COLL_GUESS_US[w.size]
            n = max(2, min(100000, int(duration_s * 1e6 / us)))
            first = KIB if w.size <= 4 * KIB else 4 * KIB
            runs.append(Run("coll", ["-b", size_text(first), "-e", size_text(w.size), "-f",
                                     str(w.size // first), "-n", str(n), "-w",
                                     str(coll_warmup(w.size)), "-c", "0"], [None, w.id]))
    if "idle" in selected:
        runs.append(Run("coll", ["-b", "4K", "-e", "4K", "-n", "2", "-w", "1", "-c", "0",
                                 "--idle-s", "%g" % max(duration_s, 1.0)], [None, "idle"]))
    return runs


def is_row(line):
    t = line.split()
    return bool(t) and t[0].isdigit()


def parse_header_depth(lines):
    for line in lines:
        if "TX depth" in line:
            return int(line.split(":")[1])
    return 128


def sample(run, workload, line, cost, header_lines):
    """A sample dict from one printed row and the cost of its window."""
    w = BY_ID[workload]
    t = line.split()
    s = {"workload": workload}
    if w.kind == "idle":  # "0 idle SECONDS": the window is the sleep and a barrier
        secs, tc = float(t[2]), cost.get("task_clock_ns")
        s.update(value=None if tc is None else tc / (secs * 1e9) * 100, iters=1, msgs=1)
    elif run.tool == "perf" and w.kind == "lat":
        iters = int(t[1])
        warm = min(max(WARMUP_BYTES // w.size, 4), LAT_WARMUP_MAX)
        s.update(value=float(t[4]), t_avg=float(t[5]), p99=float(t[7]), iters=iters,
                 msgs=2 * (iters + warm))
    elif run.tool == "perf":
        iters = int(t[1])
        depth = parse_header_depth(header_lines)
        warm = min(max(WARMUP_BYTES // w.size, 4), 2 * depth)
        avg_mbps = float(t[3])
        s.update(iters=iters, msgs=iters + warm, bw_MBps=avg_mbps,
                 value=float(t[4]) if w.kind == "rate" else avg_mbps * MIB * 8e-9)
    else:  # gw-coll-perf row: size count type redop time algbw busbw #wrong algo
        iters = int(run.args[run.args.index("-n") + 1])
        s.update(value=float(t[4]), busbw=float(t[6]), algo=t[8], iters=iters,
                 msgs=iters + coll_warmup(w.size))
    s["bytes"] = s["msgs"] * w.size
    s["cost"] = cost
    return s


def samples_from_marks(run, marks):
    """Samples of every row the watched rank printed; [] when it printed none."""
    out, header, prev = [], [], None
    rows = iter(run.rows)
    for line, snap in marks:
        if is_row(line):
            wid = next(rows, "end")
            if wid == "end" or prev is None:
                break
            if wid is not None:
                cost = _delta(prev, snap)
                # Both rows read in one wake-up (gw-compare was not scheduled in between):
                # the window is lost, and its cost is unknown rather than zero.
                if not cost.get("task_clock_ns"):
                    cost = {k: None for k in cost}
                s = sample(run, wid, line, cost, header)
                if s["value"] is not None:  # idle: CPU unknown without its window
                    out.append(s)
        else:
            header.append(line)
        prev = snap
    return out


def _delta(a, b):
    return {k: (None if a.get(k) is None or b.get(k) is None else b[k] - a[k]) for k in b}
