#!/usr/bin/python3
"""gw-model: an alpha-beta-gamma model of gradwire's allreduce algorithms and parameter server.

Per transport, four constants fitted by least squares to measured times (gw-coll-perf and
gw-ps-perf on the namespace test bed, usertools/gw-cluster.sh, and on loopback):
  alpha  s per message on the critical path (latency of one step)
  beta   s per byte through one rank's host stack (copies, syscalls, packets)
  kappa  link time per byte in units of 1/B (1.0 = the link's rate; > 1: overhead on the wire)
  gamma  s per byte reduced
Each algorithm is a count of (messages, host bytes, link bytes, reduced bytes) on its critical
path for n ranks on H hosts of L ranks each, S bytes, link rate B:
  ring  2(n-1) steps of S/n; a host link carries 2(n-1)/n S (ranks of a host are neighbours)
  rd    ceil(log2 n) (+2 when n is not a power of two) steps of S; the L ranks of a host share
        its link in steps between hosts
  hier  reduce-scatter (L-1 steps of S/L) inside, ring across hosts of S/L per rank (the link
        carries L of them: 2(H-1)/H S), allgather inside
  ps    BSP, W workers and k servers on hosts of their own: push S then pull S; a server's link
        and stack carry W S/k each way, a worker's S; the server sums W S/k
  p2p   one stream of S bytes between two hosts
K links per host (`links`: one count, or one per host; servers first): a flow between hosts a
and b stripes over min(K_a, K_b) links, each at (1 - stripe_loss (K-1)) of its rate (the bed's
striping cost, gw_model_net.py); ring and hier cross hosts at the narrowest hop, rd at the
narrowest host, the PS through the incast term (its W workers into one server's K links).
Incast (N senders into one downlink: goodput, share, latency) is gw_model_net.py.
Usage:
  gw_model.py fit CALIB.jsonl [-o params.json]      fit and print each point: measured vs model
  gw_model.py predict [--params P] [--transport tcp] [--rate 1gbit] [--per-host L]
                      [--svg-dir DIR] [--ns 2,...] [--sizes 1K,...]
  gw_model.py check CALIB.jsonl [--tol 0.15]         exit 1 if a point is off by more than tol
  gw_model.py validate POINTS.jsonl [--params P]    measured vs predicted, without refitting
  gw_model.py incast [--transport dpdk] [--senders 7] [--rate 1gbit] [--links K]
                     [--sizes 64K,...] [--resent 0.12]   N -> 1: goodput, share, p50/p99, PS round
  gw_model.py fit-net NET.jsonl [-o net.json]      the links/incast constants (stripe_loss,
                                                   buffer_bytes) from NET's calibration points
  gw_model.py validate-net NET.jsonl                links and incast: measured vs predicted
A calibration line: {"transport": "tcp", "algo": "ring"|"rd"|"hier"|"ps", "hosts": H,
"per_host": L, "rate_bps": 1e9 (0: no link, loopback), "bytes": S, "time_us": t, "servers": k,
"cores": CPU cores of the machine the whole bed ran on (default 2), "links": K or [K per host]
(default 1)}.
Python standard library only (/usr/bin/python3).
"""
import argparse
import json
import math
import os
import sys

import gw_model_net as net  # links and incast terms (beside this file)

PARAMS = ("alpha", "beta", "kappa", "gamma")


def features(algo, n, hosts, per_host, size, rate_bps, servers=1, share=1.0, links=1,
             stripe_loss=0.0):
    """(messages, host bytes, link seconds at kappa=1, reduced bytes) on the critical path.
    share: ranks per CPU core (>= 1); host and reduction work stretch by it, as on the test bed
    where every rank of every namespace shares the machine's cores. links: K, or K per host."""
    f = _features(algo, n, hosts, per_host, size, rate_bps, servers)
    share = max(1.0, share)
    if f[2] > 0 and algo == "ps":  # the incast term, which knows each host's links
        f = f[:2] + (net.ps_link_seconds(n, servers, size, rate_bps, links, stripe_loss),) + f[3:]
    elif f[2] > 0:
        f = f[:2] + (f[2] / net.link_scale(algo, links, hosts, stripe_loss),) + f[3:]
    return f[0], f[1] * share, f[2], f[3] * share


def _features(algo, n, hosts, per_host, size, rate_bps, servers):
    H, L, S = hosts, per_host, float(size)
    link = 8.0 / rate_bps if rate_bps > 0 and H > 1 else 0.0  # s per byte on the link
    if algo == "ring":
        steps = 2 * (n - 1)
        return steps, steps * S / n, steps * S / n * link, (n - 1) * S / n
    if algo == "rd":
        p = 1 << (n.bit_length() - 1)
        log = p.bit_length() - 1
        extra = 0 if p == n else 2
        cross = sum(1 for i in range(log) if (1 << i) >= L)  # steps whose partner is elsewhere
        steps = log + extra
        return (steps, steps * S, (cross * L + extra) * S * link, (log + (extra // 2)) * S)
    if algo == "hier":
        inside, across = 2 * (L - 1), 2 * (H - 1)
        host = inside * S / L + across * S / (L * H)
        return (inside + across, host, across * S / H * link,
                (L - 1) * S / L + (H - 1) * S / (L * H))
    if algo == "ps":
        workers = n
        k = servers
        busiest = 2 * max(S, workers * S / k)  # a worker's S each way, or a server's W S/k
        return (4, busiest, busiest * link, workers * S / k)
    if algo == "p2p":
        return 1, S, S * link, 0.0
    raise ValueError("unknown algorithm " + algo)


def combine(p, f):
    """Latency adds; the link and the host (stack + reduction) work overlap in the pipeline,
    so the slower of the two counts."""
    return p["alpha"] * f[0] + max(p["kappa"] * f[2], p["beta"] * f[1] + p["gamma"] * f[3])


def predict(p, algo, n, hosts, per_host, size, rate_bps, servers=1, share=1.0, links=1):
    """p: one transport's constants (params.json), with its net.json ones merged in or not."""
    return combine(p, features(algo, n, hosts, per_host, size, rate_bps, servers, share, links,
                               p.get("stripe_loss", 0.0)))


def point_features(pt, stripe_loss=0.0):
    H, L = pt["hosts"], pt.get("per_host", 1)
    if pt["algo"] == "ps":
        n = pt.get("workers", H * L - pt.get("servers", 1))
    else:
        n = H * L
    # Ranks busy at once share the machine's cores: all of them in an allreduce; in the PS
    # the servers' work is the critical path, and the workers wait meanwhile.
    ranks = pt.get("servers", 1) if pt["algo"] == "ps" else H * L
    return features(pt["algo"], n, H, L, pt["bytes"], pt.get("rate_bps", 0),
                    pt.get("servers", 1), ranks / pt.get("cores", 2), pt.get("links", 1),
                    stripe_loss)


def solve(rows, ys, active):
    """Least squares on relative error (each row divided by its measurement): small and large
    sizes count alike. Normal equations, Gauss-Jordan; parameters not in `active` are 0."""
    idx = [i for i in range(4) if active[i]]
    m = len(idx)
    A = [[0.0] * (m + 1) for _ in range(m)]
    for f, y in zip(rows, ys):
        w = [f[i] / y for i in idx]
        for a in range(m):
            for b in range(m):
                A[a][b] += w[a] * w[b]
            A[a][m] += w[a]
    for c in range(m):
        piv = max(range(c, m), key=lambda r: abs(A[r][c]))
        A[c], A[piv] = A[piv], A[c]
        if abs(A[c][c]) < 1e-300:
            return None
        for r in range(m):
            if r != c:
                k = A[r][c] / A[c][c]
                A[r] = [x - k * z for x, z in zip(A[r], A[c])]
    x = [0.0] * 4
    for a, i in enumerate(idx):
        x[i] = A[a][m] / A[a][a]
    return x


LOWER = (0.0, 0.0, 1.0, 0.0)  # no constant below 0, and no link faster than its rate


def fit_linear(rows, ys):
    """Least squares; a constant that comes out below its bound is pinned there (its term
    moved to the measured side) and the rest fitted again, so every constant is physical.
    A constant without data (a column of zeros) is pinned too. None: underdetermined."""
    active = [any(r[i] > 0 for r in rows) for i in range(4)]
    while True:
        fixed = [0.0 if active[i] else LOWER[i] for i in range(4)]
        rest = [y - sum(f * r[i] for i, f in enumerate(fixed)) for r, y in zip(rows, ys)]
        keep = [(r, y0, y) for r, y0, y in zip(rows, ys, rest) if y > 0]
        x = solve([k[0] for k in keep], [k[2] for k in keep], active) if keep else None
        if x is None:
            return None
        low = [i for i in range(4) if active[i] and x[i] < LOWER[i]]
        if not low:
            return dict(zip(PARAMS, (x[i] if active[i] else fixed[i] for i in range(4))))
        active[min(low, key=lambda i: x[i] - LOWER[i])] = False


def fit(points):
    """Per transport. max(link, host) is piecewise linear: guess for each point which side
    bounds it, fit that linear model, re-assign each point by the fitted constants, repeat
    until the assignment holds (from two starts: all link-bound, all host-bound; the better
    fit wins)."""
    out = {}
    for tr in sorted({p["transport"] for p in points}):
        pts = [p for p in points if p["transport"] == tr]
        feats = [point_features(p) for p in pts]
        ys = [p["time_us"] * 1e-6 for p in pts]
        best = None
        for start in (True, False):
            link = [start and f[2] > 0 for f in feats]
            for _ in range(50):
                rows = [(f[0], 0, f[2], 0) if lk else (f[0], f[1], 0, f[3])
                        for f, lk in zip(feats, link)]
                p = fit_linear(rows, ys)
                if p is None:
                    break
                again = [p["kappa"] * f[2] > p["beta"] * f[1] + p["gamma"] * f[3] for f in feats]
                if again == link:
                    break
                link = again
            if p is None:
                continue
            err = sum(((combine(p, f) - y) / y) ** 2 for f, y in zip(feats, ys))
            if best is None or err < best[0]:
                best = (err, p)
        if best is None:
            raise SystemExit("gw-model: calibration points of %s do not determine the model" % tr)
        out[tr] = best[1]
    return out


def load_points(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip() and not line.startswith("#")]


def rel_errors(params, points):
    for p in points:
        tp = params[p["transport"]]
        pred = combine(tp, point_features(p, tp.get("stripe_loss", 0.0)))
        meas = p["time_us"] * 1e-6
        yield p, meas, pred, (pred - meas) / meas


def parse_size(text):
    units = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().replace("IB", "")
    num = t.rstrip("KMGTB")
    return int(float(num) * units[t[len(num):]])


def parse_rate(text):
    t = text.lower().replace("bit", "").replace("/s", "")
    mult = {"k": 1e3, "m": 1e6, "g": 1e9}.get(t[-1:], 1)
    return float(t.rstrip("kmg")) * mult


def human(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return ("%d %s" % (nbytes, unit)) if nbytes == int(nbytes) else "%.1f %s" % (nbytes, unit)
        nbytes /= 1024


def fmt_time(s):
    return "%.3g s" % s if s >= 1 else "%.3g ms" % (s * 1e3) if s >= 1e-3 else "%.3g us" % (s * 1e6)


def main(argv):
    import gw_model_report as report  # tables and SVG (gw_model_report.py beside this file)

    ap = argparse.ArgumentParser(prog="gw-model", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit")
    f.add_argument("calib")
    f.add_argument("-o", "--out")
    c = sub.add_parser("check")
    c.add_argument("calib")
    c.add_argument("--tol", type=float, default=0.15)
    here = os.path.dirname(os.path.abspath(__file__))
    v = sub.add_parser("validate")
    v.add_argument("points")
    v.add_argument("--params", default=os.path.join(here, "params.json"))
    pr = sub.add_parser("predict")
    pr.add_argument("--params", default=os.path.join(here, "params.json"))
    pr.add_argument("--transport", default="tcp")
    pr.add_argument("--rate", default="1gbit", help="link rate of every host (tc syntax)")
    pr.add_argument("--per-host", type=int, default=1, help="ranks per host (L)")
    pr.add_argument("--ns", default="2,4,8,16,64,256,1024,10000")
    pr.add_argument("--sizes", default="1K,64K,1M,16M,256M,1G,10G")
    pr.add_argument("--servers", default="1,4,16", help="PS server counts to compare")
    pr.add_argument("--svg-dir", help="write time/busbw plots here")
    pr.add_argument("--links", type=int, default=1, help="links per host (K)")
    pr.add_argument("--net", default=os.path.join(here, "net.json"))
    ic = sub.add_parser("incast", help="N senders into one receiver, and the PS through it")
    ic.add_argument("--params", default=os.path.join(here, "params.json"))
    ic.add_argument("--net", default=os.path.join(here, "net.json"))
    ic.add_argument("--transport", default="dpdk")
    ic.add_argument("--senders", type=int, default=7)
    ic.add_argument("--rate", default="1gbit")
    ic.add_argument("--links", default="1", help="K, or K of the receiver,sender 1,...")
    ic.add_argument("--sizes", default="64K,1M,16M")
    ic.add_argument("--window", type=int, help="messages in flight per sender (default: "
                    "gw-incast.sh's, 4, 2 from 4 MiB)")
    ic.add_argument("--resent", type=float, default=0.0,
                    help="share of packets re-sent (dpdk without receiver credits: ~0.12)")
    ic.add_argument("--queue", type=float, default=0.005, help="downlink queue, seconds")
    ic.add_argument("--cores", type=int, default=2)
    fn = sub.add_parser("fit-net")
    fn.add_argument("points")
    fn.add_argument("--params", default=os.path.join(here, "params.json"))
    fn.add_argument("-o", "--out")
    vn = sub.add_parser("validate-net")
    vn.add_argument("points")
    vn.add_argument("--params", default=os.path.join(here, "params.json"))
    vn.add_argument("--net", default=os.path.join(here, "net.json"))
    vn.add_argument("--tol", type=float, default=0.15)
    a = ap.parse_args(argv)
    if a.cmd in ("fit", "check"):
        pts = load_points(a.calib)
        params = fit(pts)
        worst = report.print_fit(params, list(rel_errors(params, pts)))
        if a.cmd == "fit" and a.out:
            write_json(a.out, params)
        if a.cmd == "check" and worst > a.tol:
            print("gw-model: worst error %.1f %% is above %.0f %%" % (worst * 100, a.tol * 100))
            return 1
        return 0
    with open(a.params) as pf:
        params = json.load(pf)
    if a.cmd == "validate":
        pts = [p for p in load_points(a.points) if p["transport"] in params]
        report.print_fit(params, list(rel_errors(params, pts)))
        return 0
    if a.cmd == "fit-net":
        nets = net.fit_net(params, net.load(a.points))
        print(json.dumps(nets, indent=1, sort_keys=True))
        if a.out:
            write_json(a.out, nets)
        return 0
    nets = {}
    if os.path.exists(a.net):
        with open(a.net) as nf:
            nets = json.load(nf)
    if a.cmd == "validate-net":
        pts = [p for p in net.load(a.points) if p["transport"] in params]
        net.validate(params, nets, pts, a.tol)
        return 0
    if a.transport not in params:
        raise SystemExit("gw-model: no parameters for transport %s in %s" % (a.transport, a.params))
    p = net.merged(params, nets, a.transport)
    if a.cmd == "incast":
        links = [int(x) for x in a.links.split(",")]
        report.incast_report(p, a.transport, a.senders, parse_rate(a.rate),
                             links[0] if len(links) == 1 else links,
                             [parse_size(x) for x in a.sizes.split(",")], a.window, a.resent,
                             a.queue, a.cores)
        return 0
    report.predict_report(p, a.transport, parse_rate(a.rate), a.per_host,
                          [int(x) for x in a.ns.split(",")],
                          [parse_size(x) for x in a.sizes.split(",")],
                          [int(x) for x in a.servers.split(",")], a.svg_dir, a.links)
    return 0


def write_json(path, obj):
    with open(path, "w") as out:
        json.dump(obj, out, indent=1, sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
