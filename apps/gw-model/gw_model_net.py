"""gw-model's network terms (issue 44): K links per host, and incast (N senders into one host).

Links: a flow between hosts a and b stripes over min(K_a, K_b) links; k links carry
k (1 - stripe_loss (k-1)) times one link's rate (the bed's striping cost; 0 = ideal).
Incast: N senders, each with `window` messages of S bytes posted, into one receiver:
  goodput = min(sum of the senders' flow rates, the receiver's downlink) / kappa
            x (1 - resent)            (resent: dpdk without receiver credits; an input, 0 else)
            capped by the receiver's host stack (beta, its ranks sharing the cores)
  share   = 1/N each (fair sharing)
  p50     = alpha + N (window S + buffer_bytes) / goodput   (Little's law at the fair share:
            what a sender has posted and not yet delivered, drained at 1/N of the goodput;
            buffer_bytes: what tcp on one link holds past the window in socket and qdisc,
            as its sends complete on the write; dpdk's complete on the ack: 0)
  p99     = p50 + the downlink's queue (full when the senders oversubscribe it): the floor
            of fair sharing; loss recovery and unfairness add to it, the model has neither.
The PS push (W workers into a server) and pull go through the same term (ps_link_seconds).
Constants per transport in net.json (fit_net: stripe_loss from the calibration pair points,
buffer_bytes from the calibration lone-sender latencies); points in net_points.jsonl.
"""
import json
from collections import Counter

DEFAULTS = {"stripe_loss": 0.0, "buffer_bytes": 0.0}


def host_links(links, hosts):
    """K per host: one count for all, or a list (servers / the receiver first)."""
    if isinstance(links, (list, tuple)):
        if len(links) < hosts:
            raise ValueError("links: %d counts for %d hosts" % (len(links), hosts))
        return [int(k) for k in links]
    return [int(links)] * hosts


def stripe(k, loss):
    """Rate of one flow over k links, in units of one link's rate."""
    return k * max(0.0, 1.0 - loss * (k - 1))


def flow(ka, kb, loss):
    return stripe(min(ka, kb), loss)


def link_scale(algo, links, hosts, loss):
    """How many links' worth the busiest host-to-host hop of an algorithm has."""
    if hosts < 2:
        return 1.0
    if not isinstance(links, (list, tuple)):
        return stripe(int(links), loss)  # every host alike (and fast at 10,000 hosts)
    K = host_links(links, hosts)[:hosts]
    if algo in ("ring", "hier"):  # each host sends to the next: the narrowest hop bounds it
        return min(flow(K[i], K[(i + 1) % hosts], loss) for i in range(hosts))
    if algo == "p2p":
        return flow(K[0], K[1], loss)
    return stripe(min(K), loss)  # rd: partners span the hosts; the narrowest bounds a step


def incast_rate(rates, recv, loss):
    """Goodput into one host of `recv` links from flows of `rates` (link units), kappa = 1."""
    return min(sum(rates), stripe(recv, loss))


def ps_link_seconds(workers, servers, size, rate_bps, links, loss):
    """A BSP round's link time at kappa = 1: each server takes W S/k in through the incast term
    and sends as much out (the pull: the same links the other way); each worker moves S each
    way, its uplink split over the k servers. All links 1: 2 max(S, W S/k) / rate."""
    if isinstance(links, (list, tuple)):
        K = host_links(links, servers + workers)
        srv, wrk = Counter(K[:servers]), Counter(K[servers:servers + workers] or K[:1])
    else:  # counts of hosts per K: 10,000 workers alike cost one term
        srv, wrk = Counter({int(links): servers}), Counter({int(links): workers})
    S = float(size)
    server = max(workers * S / servers / incast_rate(
        [c * min(flow(kw, ks, loss), stripe(kw, loss) / servers) for kw, c in wrk.items()],
        ks, loss) for ks in srv)
    worker = max(S / min(stripe(kw, loss), sum(c * flow(kw, ks, loss) for ks, c in srv.items()))
                 for kw in wrk)
    return 2 * max(server, worker) * 8.0 / rate_bps


def default_window(size):
    return 4 if size < (4 << 20) else 2  # as usertools/gw-incast.sh runs gw-incast


def incast(p, senders, size, rate_bps, window=None, links=1, resent=0.0, queue_s=0.005, cores=2):
    """N -> 1 on links of rate_bps. p: one transport's constants (params.json + net.json).
    links: K, or [receiver, sender 1, ...]. Returns goodput (B/s), its fraction of the
    downlink, each sender's share, p50 and p99 of a message's latency (s)."""
    loss = p.get("stripe_loss", 0.0)
    K = host_links(links, senders + 1)
    rates = [flow(k, K[0], loss) for k in K[1:senders + 1]]
    good = incast_rate(rates, K[0], loss) * rate_bps / 8 / p["kappa"] * (1 - resent)
    if p.get("beta", 0) > 0:  # the receiver's stack, its ranks sharing the machine's cores
        good = min(good, 1 / (p["beta"] * max(1.0, (senders + 1) / cores)))
    w = window or default_window(size)
    p50 = p.get("alpha", 0) + senders * (w * size + p.get("buffer_bytes", 0)) / good
    full = sum(rates) > stripe(K[0], loss)  # oversubscribed: the downlink's queue fills
    return {"goodput": good, "of_link": good * 8 / (rate_bps * K[0]), "share": 1.0 / senders,
            "p50": p50, "p99": p50 + (queue_s if full else 0.0)}


def merged(params, nets, transport):
    """A transport's constants: params.json's and net.json's (defaults where it has none)."""
    return dict(DEFAULTS, **params[transport], **nets.get(transport, {}))


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip() and not line.startswith("#")]


def predicted(p, pt):
    """{metric: model value} for one point of net_points.jsonl."""
    import gw_model as m
    kind, S, rate = pt["kind"], pt["bytes"], pt["rate_bps"]
    cores, K = pt.get("cores", 2), pt.get("links", 1)
    out = {}
    if kind == "pair":
        gp = lambda k: S / m.predict(p, "p2p", 2, 2, 1, S, rate, share=2 / cores, links=k)
        out = {"MiBps": gp(K) / 2 ** 20, "vs_1link": gp(K) / gp(1)}
    elif kind == "ring":
        H = pt["hosts"]
        bus = lambda k: 2 * (H - 1) / H * S / m.predict(p, "ring", H, H, 1, S, rate,
                                                        share=H / cores, links=k) / 1e6
        out = {"busbw_MBps": bus(K), "vs_1link": bus(K) / bus(1)}
    elif kind == "ps":
        W, k = pt["workers"], pt["servers"]
        t = m.predict(p, "ps", W, W + k, 1, S, rate, k, share=k / cores, links=K)
        out = {"round_ms": t * 1e3}
    elif kind == "incast":
        N, w, q = pt["senders"], pt.get("window"), pt.get("queue_s", 0.005)
        many = incast(p, N, S, rate, w, K, pt.get("resent", 0.0), q, cores)
        one = incast(p, 1, S, rate, w, K, 0.0, q, cores)
        out = {"goodput_link": many["of_link"], "p99_ms": many["p99"] * 1e3,
               "p99_alone_ms": one["p99"] * 1e3, "p99_ratio": many["p99"] / one["p99"]}
    return {k: v for k, v in out.items() if k in pt["measured"]}


def fit_net(params, points):
    """stripe_loss: least squares (relative) of K (1 - c (K-1)) on the calibration pairs'
    vs_1link; buffer_bytes: mean of what the calibration lone senders' p99 holds past the
    window. Transports without such points keep the defaults (0: ideal, nothing held)."""
    out = {}
    for tr in sorted(params):
        pts = [pt for pt in points if pt["transport"] == tr]
        ab = [(K * (K - 1) / y, (K - y) / y) for pt in pts if "vs_1link" in pt.get("calib", ())
              and pt["kind"] == "pair" for K, y in [(pt["links"], pt["measured"]["vs_1link"])]]
        c = sum(a * b for a, b in ab) / sum(a * a for a, _ in ab) if ab else 0.0
        held = []
        for pt in pts:
            if pt["kind"] == "incast" and "p99_alone_ms" in pt.get("calib", ()):
                p = dict(DEFAULTS, **params[tr], stripe_loss=c)
                one = incast(p, 1, pt["bytes"], pt["rate_bps"], pt.get("window"),
                             pt.get("links", 1), 0.0, 0.0, pt.get("cores", 2))
                w = pt.get("window") or default_window(pt["bytes"])
                t = pt["measured"]["p99_alone_ms"] * 1e-3 - p["alpha"]
                held.append(t * one["goodput"] - w * pt["bytes"])
        out[tr] = {"stripe_loss": max(0.0, c),
                   "buffer_bytes": max(0.0, sum(held) / len(held)) if held else 0.0}
    return out


def validate(params, nets, points, tol=0.15):
    """Prints measured vs model per point (links and PS, then incast); returns (within tol,
    validated), fitted cells not counted."""
    rows = []
    for pt in points:
        got = predicted(merged(params, nets, pt["transport"]), pt)
        rows.append((pt, {k: (pt["measured"][k], v, (v - pt["measured"][k]) / pt["measured"][k])
                          for k, v in got.items()}))
    fitted = lambda pt, k: k in pt.get("calib", ())
    cell = lambda pt, k, e: "%s (%+.0f %%%s)" % (num(e[1]), round(e[2] * 100) + 0.0,
                                                 ", fitted" if fitted(pt, k) else "")
    print("| point | metric | measured | model (error) |\n|---|---|---|---|")
    for pt, e in rows:
        if pt["kind"] != "incast":
            for k, v in e.items():
                print("| %s | %s | %s | %s |" % (label(pt), k, num(v[0]), cell(pt, k, v)))
    cols = ("goodput_link", "p99_alone_ms", "p99_ms", "p99_ratio")
    print("\n| incast | message | goodput / link | p99 alone ms | p99 %s ms | p99 ratio |\n"
          "|---|---|---|---|---|---|" % "N -> 1")
    for pt, e in rows:
        if pt["kind"] == "incast":
            print("| %s | %s | %s |" % (label(pt), human(pt["bytes"]), " | ".join(
                "%s / %s" % (num(e[k][0]), cell(pt, k, e[k])) if k in e else "-" for k in cols)))
    ok = n = 0
    by = {}
    for pt, e in rows:
        for k, v in e.items():
            if not fitted(pt, k):
                good = abs(v[2]) <= tol
                ok, n = ok + good, n + 1
                b = by.setdefault(k, [0, 0])
                b[0], b[1] = b[0] + good, b[1] + 1
    group = lambda lat: [sum(v[i] for k, v in by.items() if k.startswith("p99") == lat)
                         for i in (0, 1)]
    print("\n# within %.0f %%: %d of %d (fitted cells not counted); rates and ratios %d of %d, "
          "p99 latencies %d of %d; %s" % (tol * 100, ok, n, *group(False), *group(True), ", ".join(
              "%s %d/%d" % (k, a, b) for k, (a, b) in by.items())))
    return ok, n


def label(pt):
    if pt["kind"] == "incast":
        mode = pt["transport"] + ("" if pt["transport"] == "tcp" else
                                  " credits" if pt.get("credits", True) else " no credits")
        return "%s %d -> 1%s" % (mode, pt["senders"], (", " + pt["run"]) if "run" in pt else "")
    text = "%s %s, %s link%s" % (pt["transport"], pt["kind"], pt.get("links", 1),
                                 "" if pt.get("links", 1) == 1 else "s")
    if pt["kind"] == "ring":
        text += ", %d hosts" % pt["hosts"]
    if pt["kind"] == "ps":
        text += ", %d server %d workers%s" % (pt["servers"], pt["workers"],
                                               "" if pt.get("credits", True) else ", no credits")
    if "round" in pt:
        text += " (round %d)" % pt["round"]
    return text + ", " + human(pt["bytes"])


def num(x):
    return "%.3g" % x if abs(x) < 1000 else "%.0f" % x


def human(n):
    return "%d MiB" % (n >> 20) if n >= 1 << 20 else "%d KiB" % (n >> 10)
