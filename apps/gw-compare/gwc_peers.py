"""The peers users compare transports with, run like the other reference tools (two processes
on 127.0.0.1, both processes' counters): UCX's ucx_perftest (UCP tag matching, over tcp on lo
and over shared memory) and libfabric's fi_pingpong (tcp provider, RDM endpoint, tagged).
Both busy-poll. Speed is the tool's own figure, cost the counters over a window:
  ucx_perftest  runs until stopped: it prints a progress line a second, and gw-compare stops it
                after 1 + max(1, duration) of them. Window: first to last progress line (the
                set-up, the warm-up and the first iterations, which wait ms each while the
                peer still sets up, stay out: 100-200 ms of CPU in runs here). Speed: median
                over the later lines of each line's own interval: tag_lat's 50.0%ile (half
                round trip), tag_bw's bandwidth (MiB/s) or message rate.
  fi_pingpong   runs -I iterations, sized from the pace it showed on that workload earlier in
                the run (a slow guess in round 1), and prints only when done: its window is
                the whole process (set-up included, as for iperf3). Speed: usec/xfer, the
                average half round trip (time / 2 x iterations); it has no warm-up.
Debian 12's libfabric-bin ships fi_pingpong only: fabtests (fi_rdm_tagged_bw) is not packaged.
"""
import re
import statistics

import gwc_proc
import gwc_workloads as W

UCX_TLS = {"ucx_perftest": "tcp", "ucx_perftest-shm": "shm"}
FI_ARGS = ["-p", "tcp", "-e", "rdm", "-m", "tagged", "-d", "lo"]  # ofi_rxm over tcp on lo
# fi_pingpong's round-1 guess, us per iteration: slow on purpose (a short first run, not a long
# one); later rounds use the pace measured here.
GUESS_US = 200.0
MIN_ITERS, MAX_ITERS = 20, 10_000_000
UCX_ITERS = 1_000_000_000  # never reached: ucx_perftest is stopped after its progress lines
PACKAGES = {"ucx_perftest": "ucx-utils", "fi_pingpong": "libfabric-bin"}


def iterations(secs, pace_us=None):
    """Iterations that take about `secs` at `pace_us` (us per iteration; None: the guess)."""
    if pace_us is None:
        pace_us = GUESS_US
    return int(max(MIN_ITERS, min(MAX_ITERS, secs * 1e6 / max(pace_us, 1e-3))))


def ucx_args(w):
    """The client's test arguments for workload `w`: more iterations than any run lasts (it is
    stopped after its progress lines), 100 warm-up ones."""
    test = "tag_lat" if w.kind == "lat" else "tag_bw"
    return ["-t", test, "-s", str(w.size), "-n", str(UCX_ITERS), "-w", "100"]


def parse_ucx_line(line):
    """One ucx_perftest result line -> {final, iters, p50_us, avg_us, overall_us, MiBps,
    msg_per_s}, or None for any other line. A progress line ("[thread 0]", once a second) and
    the Final line share the columns: iterations so far, latency 50.0%ile / average / overall
    (us), bandwidth average / overall (MiB/s), message rate average / overall (msg/s);
    average = since the previous line, overall = since the timed phase began."""
    t = re.sub(r"^\s*(Final:|\[thread \d+\])", "", line).split()
    if len(t) != 8 or t == line.split():
        return None
    try:
        v = [float(x) for x in t]
    except ValueError:
        return None
    return {"final": "Final:" in line, "iters": int(v[0]), "p50_us": v[1], "avg_us": v[2],
            "overall_us": v[3], "MiBps": v[4], "msg_per_s": v[6]}


def ucx_progress(marks):
    """The (parsed line, snapshot) of each result line in `marks`."""
    return [(r, sn) for r, sn in ((parse_ucx_line(ln), sn) for ln, sn in marks) if r]


def ucx_sample(w, marks):
    """A sample from the client's marks, or (None, why). The window runs from its first
    progress line (1 s into the timed phase: set-up, warm-up and the slow first iterations,
    ms each while the peer still sets up, stay out) to its last; speed = the median over the
    lines after the first of each line's own interval: latency 50.0%ile, bandwidth or
    message rate average."""
    lines = ucx_progress(marks)
    if len(lines) < 2:
        return None, "ucx_perftest printed %d progress line(s), 2 needed" % len(lines)
    (first, s0), (last, s1) = lines[0], lines[-1]
    rest = [r for r, _ in lines[1:]]
    med = lambda key: statistics.median(r[key] for r in rest)
    if w.kind == "lat":
        s = {"value": med("p50_us"), "t_avg": med("avg_us")}
    elif w.kind == "rate":
        s = {"value": med("msg_per_s") * 1e-6}
    else:
        s = {"value": med("MiBps") * W.MIB * 8e-9}
    per_iter = 2 if w.kind == "lat" else 1  # a ping-pong iteration is two messages
    iters = last["iters"] - first["iters"]
    cost = gwc_proc.delta(s0, s1)
    if iters <= 0 or not cost.get("task_clock_ns"):  # lines read in one wake-up: unknown
        cost = {k: None for k in gwc_proc.COST_KEYS}
    s.update(workload=w.id, msgs=per_iter * max(iters, 1), bytes=per_iter * max(iters, 1)
             * w.size, iters=iters, cost=cost)
    return s, None


def run_ucx(ctx, name, w, secs, timeout):
    """One ucx_perftest pair (server, then client) for workload `w`, stopped once the client
    printed its progress lines: 1 + max(1, secs rounded) of them, a second apart."""
    port = str(ctx.port())
    env = {"UCX_TLS": UCX_TLS[name], "UCX_NET_DEVICES": "lo"}  # tcp: traffic on lo only
    ranks = [(["ucx_perftest", "-p", port], env, None),
             (["ucx_perftest", "127.0.0.1", "-p", port] + ucx_args(w), env, None)]
    want = 1 + max(1, round(secs))
    marks, cmds, err = _run_pair("ucx_perftest", ranks, env, timeout,
                                 until=lambda m: len(ucx_progress(m)) >= want)
    if err:
        return None, cmds, err
    s, why = ucx_sample(w, marks)
    return s, cmds, why


def _run_pair(tool, ranks, env, timeout, until=None):
    """Server, then client (watched). @return (client's marks, commands, error or None)."""
    procs, marks, ok = gwc_proc.run_ranks(ranks, timeout, stagger_s=0.5, until=until)
    cmds = [" ".join(["%s=%s" % kv for kv in sorted(env.items())] + p.command) for p in procs]
    tail = (procs[1].stderr() + procs[1].stdout()).strip().splitlines()[-1:]
    for p in procs:
        p.close()
    if ok:
        return marks, cmds, None
    return marks, cmds, "%s failed (exit %s, server %s): %s" % (
        tool, procs[1].rc, procs[0].rc, tail or "no output")


def parse_fi_pingpong(text):
    """fi_pingpong's result row -> {size, usec_per_xfer, MBps, secs}, or None. Columns: bytes
    #sent #ack total time MB/sec usec/xfer Mxfers/sec (sizes and counts as "64k", "1k")."""
    for line in text.splitlines():
        t = line.split()
        if len(t) == 8 and re.match(r"^\d", t[0]) and t[4].endswith("s"):
            try:
                return {"size": t[0], "secs": float(t[4][:-1]), "MBps": float(t[5]),
                        "usec_per_xfer": float(t[6])}
            except ValueError:
                return None
    return None


def fi_sample(w, marks, iters):
    r = parse_fi_pingpong("".join(ln for ln, _ in marks))
    if r is None or not marks:
        return None, "fi_pingpong printed no result row"
    s = {"workload": w.id, "value": r["usec_per_xfer"], "t_avg": r["usec_per_xfer"],
         "msgs": 2 * iters, "bytes": 2 * iters * w.size, "iters": iters,
         "cost": marks[-1][1], "pace_us": 2 * r["usec_per_xfer"]}
    return s, None


def run_fi_pingpong(ctx, w, secs, timeout, pace_us=None):
    """One fi_pingpong pair for a ping-pong workload (both sides get -I and -S)."""
    port = str(ctx.port())
    n = iterations(secs, pace_us)
    common = FI_ARGS + ["-I", str(n), "-S", str(w.size)]
    ranks = [(["fi_pingpong"] + common + ["-B", port], {}, None),
             (["fi_pingpong"] + common + ["-P", port, "127.0.0.1"], {}, None)]
    marks, cmds, err = _run_pair("fi_pingpong", ranks, {}, timeout)
    if err:
        return None, cmds, err
    s, why = fi_sample(w, marks, n)
    return s, cmds, why
