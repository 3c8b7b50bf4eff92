#!/usr/bin/python3
"""Measure gw-model's calibration/validation points on the namespace test bed (root).

Runs usertools/gw-cluster.sh for every shape and algorithm asked for, gw-coll-perf (allreduce)
or gw-ps-perf (parameter server, BSP) inside it, and appends one JSON line per (shape, size) to
the output file in gw_model.py's calibration format.
  gw_model_measure.py --build build -o points.jsonl --transport tcp --rates 1gbit,200mbit \
      --shapes 2x1,4x1,2x2,4x2 --algos ring,rd,hier,ps --sizes 64K,1M,16M
A shape HxL is H hosts of L ranks; ps uses one rank per host, --servers of the hosts serving.
Rate "loopback": no bed; gw-coll-perf --ranks L over 127.0.0.1 (shapes 1xL). Those points are
host-bound (rate_bps 0), so they fix the model's host constants (beta, gamma) that link-bound
bed points leave loose.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SPECS = {"tcp": "tcp:iface={iface}",
         "dpdk": "dpdk:vdev=net_af_packet0;qdisc_bypass=0,iface={iface}"}


def rate_bps(text):
    if text == "loopback":
        return 0.0
    t = text.lower().replace("bit", "")
    return float(t.rstrip("kmg")) * {"k": 1e3, "m": 1e6, "g": 1e9}.get(t[-1:], 1)


def bed(args, hosts, per, rate, cmd, logs=None):
    # The burst is passed, not left to the script's default, so iters_for sizes against the
    # bucket the links really have.
    full = [os.path.join(ROOT, "usertools", "gw-cluster.sh"), "--hosts", str(hosts),
            "--ranks-per-host", str(per), "--rate", rate, "--burst", str(burst_bytes(rate)),
            "--timeout", str(args.timeout)]
    if logs:
        full += ["--logs", logs]
    r = subprocess.run(full + ["--"] + cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write("gw-model-measure: %s failed:\n%s%s" % (" ".join(cmd), r.stdout,
                                                                 r.stderr[-2000:]))
        return None
    return r.stdout


def burst_bytes(rate):
    """The tbf burst of every bed link (gw-cluster.sh's default): 1 ms at the rate, at least
    128 KiB (two GSO segments)."""
    return max(int(rate_bps(rate)) // 8 // 1000, 131072)


def iters_for(args, rate, size):
    """(warm-up, timed) iterations for one size. A full tbf bucket lets the first `burst` bytes
    of a link pass at once: warm-ups that move twice the burst drain it, and the timed
    iterations move at least 8 bursts, so small sizes measure the link, not the bucket."""
    if rate == "loopback":
        return max(2, args.iters // 2), args.iters
    b = burst_bytes(rate)
    return max(1, -(-2 * b // size)), max(args.iters, -(-8 * b // size))


def coll(args, hosts, per, rate, algo, sizes):
    """One bed run per size (iterations scaled to the size: iters_for). {size: time_us}."""
    perf = os.path.join(args.build, "apps", "gw-coll-perf", "gw-coll-perf")
    got = {}
    for size in sizes:
        w, n = iters_for(args, rate, size)
        cmd = ["-b", str(size), "-e", str(size), "-n", str(n), "-w", str(w), "-c", "0",
               "--algo", algo, "--json"]
        if rate == "loopback":
            r = subprocess.run([perf, "-t", args.transport, "--ranks", str(per)] + cmd,
                               capture_output=True, text=True, timeout=args.timeout)
            out = r.stdout if r.returncode == 0 else None
            if out is None:  # as bed() does: say why a point is missing
                sys.stderr.write("gw-model-measure: loopback %s failed:\n%s" %
                                 (" ".join(r.args), r.stderr[-2000:]))
        else:
            out = bed(args, hosts, per, rate, [perf, "-t", SPECS[args.transport]] + cmd)
        rows = [json.loads(line) for line in (out or "").splitlines() if line.startswith("{")]
        got.update({r["size"]: r["time_us"] for r in rows})
    return got


def ps(args, hosts, rate, servers, sizes):
    """One bed run of gw-ps-perf per size: {size: median push+pull us}."""
    perf = os.path.join(args.build, "apps", "gw-ps-perf", "gw-ps-perf")
    got = {}
    for size in sizes:
        w, n = iters_for(args, rate, size)
        with tempfile.TemporaryDirectory() as logs:
            out = bed(args, hosts, 1, rate, [perf, "-t", SPECS[args.transport], "--servers",
                                             str(servers), "-s", str(size), "-n", str(n),
                                             "--warmup", str(w), "--no-ring"], logs)
            if out is None:
                continue
            with open(os.path.join(logs, "rank%d.log" % servers)) as f:  # the first worker
                for line in f:
                    cols = line.split()
                    if len(cols) >= 2 and cols[0].isdigit():
                        got[int(cols[0])] = float(cols[1])
    return got


def median_of(repeat, run):
    """{size: median time} over `repeat` runs of run() -> {size: time}."""
    got = {}
    for _ in range(repeat):
        for size, t in run().items():
            got.setdefault(size, []).append(t)
    return {s: sorted(v)[len(v) // 2] for s, v in got.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--transport", default="tcp", choices=sorted(SPECS))
    ap.add_argument("--rates", default="1gbit")
    ap.add_argument("--shapes", default="2x1,4x1,2x2")
    ap.add_argument("--algos", default="ring,rd,hier")
    ap.add_argument("--servers", default="1,2")
    ap.add_argument("--sizes", default="64K,1M,16M")
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3,
                    help="bed runs per point; the median is kept (a shared machine is noisy)")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    sizes = [int(s[:-1]) << {"K": 10, "M": 20, "G": 30}[s[-1]] if s[-1] in "KMG" else int(s)
             for s in a.sizes.split(",")]
    with open(a.out, "a") as out:
        for rate in a.rates.split(","):
            for shape in a.shapes.split(","):
                hosts, per = (int(x) for x in shape.split("x"))
                for algo in a.algos.split(","):
                    if (algo == "hier" and per < 2) or (algo == "ps" and per > 1):
                        continue
                    if rate == "loopback" and (hosts != 1 or algo not in ("ring", "rd")):
                        sys.stderr.write("gw-model-measure: loopback measures ring and rd on "
                                         "shapes 1xL; skipped %s %s\n" % (shape, algo))
                        continue
                    if algo == "ps":
                        runs = [(k, size, t) for k in map(int, a.servers.split(",")) if k < hosts
                                for size, t in median_of(a.repeat, lambda: ps(a, hosts, rate, k,
                                                                            sizes)).items()]
                    else:
                        got = median_of(a.repeat, lambda: coll(a, hosts, per, rate, algo, sizes))
                        runs = [(0, size, got.get(size)) for size in sizes]
                    for k, size, t in runs:
                        if t is None:
                            continue
                        pt = {"transport": a.transport, "algo": algo, "hosts": hosts,
                              "per_host": per, "rate_bps": rate_bps(rate), "bytes": size,
                              "time_us": round(t, 1)}
                        if algo == "ps":
                            pt.update(servers=k, workers=hosts - k)
                        out.write(json.dumps(pt) + "\n")
                        out.flush()
                        print(json.dumps(pt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
