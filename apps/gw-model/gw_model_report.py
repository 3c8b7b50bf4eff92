"""gw-model's output: the fit table, the prediction table, crossovers and SVG line plots."""
import math
import os

import gw_model as m

ALGOS = ("ring", "rd", "hier")
COLORS = {"ring": "#1f77b4", "rd": "#ff7f0e", "hier": "#2ca02c"}


def print_fit(params, errs):
    for tr, p in sorted(params.items()):
        print("# %s: alpha %.2f us/message, beta %.3f ns/B (host stack %.2f GB/s), kappa %.3f "
              "(link at %.0f %% of its rate), gamma %.3f ns/B (%.2f GB/s)"
              % (tr, p["alpha"] * 1e6, p["beta"] * 1e9, 1e-9 / p["beta"] if p["beta"] else 0,
                 p["kappa"], 100 / p["kappa"] if p["kappa"] else 0, p["gamma"] * 1e9,
                 1e-9 / p["gamma"] if p["gamma"] else 0))
    print("| transport | algo | hosts x ranks | link | size | measured | model | error |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for p, meas, pred, err in errs:
        who = "%dx%d" % (p["hosts"], p.get("per_host", 1))
        if p["algo"] == "ps":
            who += " (%d server%s)" % (p.get("servers", 1), "s" if p.get("servers", 1) > 1 else "")
        rate = "%g Mbit/s" % (p["rate_bps"] / 1e6) if p.get("rate_bps") else "loopback"
        print("| %s | %s | %s | %s | %s | %s | %s | %+.1f %% |"
              % (p["transport"], p["algo"], who, rate, m.human(p["bytes"]), m.fmt_time(meas),
                 m.fmt_time(pred), err * 100))
        worst = max(worst, abs(err))
    print("# worst error: %.1f %% over %d points" % (worst * 100, len(errs)))
    return worst


def times(p, n, L, size, rate, servers, links=1):
    H = max(1, n // L)
    t = {"ring": m.predict(p, "ring", n, H, L, size, rate, links=links),
         "rd": m.predict(p, "rd", n, H, L, size, rate, links=links)}
    if L > 1 and H > 1:
        t["hier"] = m.predict(p, "hier", n, H, L, size, rate, links=links)
    ps = {k: m.predict(p, "ps", n, n, 1, size, rate, k, links=links) for k in servers if k <= n}
    return t, ps


def predict_report(p, transport, rate, L, ns, sizes, servers, svg_dir, links=1):
    print("# gw-model: %s, %d link(s) of %g Gbit/s per host, %d rank(s) per host; alpha %.2f us, "
          "beta %.3f ns/B, kappa %.3f, gamma %.3f ns/B, stripe_loss %.4f"
          % (transport, links, rate / 1e9, L, p["alpha"] * 1e6, p["beta"] * 1e9, p["kappa"],
             p["gamma"] * 1e9, p.get("stripe_loss", 0.0)))
    print("# time of one allreduce of S bytes; ps(k) = BSP push+pull, n workers, k servers on "
          "hosts of their own; busbw = 2(n-1)/n S / time")
    ks = [k for k in servers]
    head = ["n", "size"] + list(ALGOS) + ["ps(k=%d)" % k for k in ks] + ["chosen", "busbw"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for n in ns:
        if n % L:
            continue
        for s in sizes:
            t, ps = times(p, n, L, s, rate, ks, links)
            best = min(t, key=t.get)
            cells = [str(n), m.human(s)] + [m.fmt_time(t[a]) if a in t else "-" for a in ALGOS]
            cells += [m.fmt_time(ps[k]) if k in ps else "-" for k in ks]
            note = best
            if ps and min(ps.values()) < t[best]:
                k = min(ps, key=ps.get)
                note += " (ps k=%d faster)" % k
            busbw = 2 * (n - 1) / n * s / t[best] / 1e9
            print("| " + " | ".join(cells + [note, "%.3g GB/s" % busbw]) + " |")
    crossovers(p, rate, L, ns, ks, links)
    if svg_dir:
        plots(p, rate, L, ns, sizes, ks, svg_dir, transport, links)


def grid(lo=1 << 10, hi=10 << 30):
    """Sizes 1 KiB .. 10 GiB, four per octave."""
    s, out = float(lo), []
    while s <= hi:
        out.append(s)
        s *= 2 ** 0.25
    return out


def crossover_size(f):
    """Smallest size of the grid where f(size) is true, or None."""
    return next((s for s in grid() if f(s)), None)


def ranges(f):
    """The size ranges of the grid where f(size) is true, as text ("never" if none)."""
    out, start, prev = [], None, None
    for s in grid():
        if f(s) and start is None:
            start = s
        if not f(s) and start is not None:
            out.append("%s..%s" % (m.human(start), m.human(prev)))
            start = None
        prev = s
    if start is not None:
        out.append("%s and up" % m.human(start))
    return ", ".join(out) or "never"


def crossovers(p, rate, L, ns, ks, links=1):
    print("# crossovers: rd->ring = smallest size where the ring is faster; ring->hier likewise; "
          "ps k = sizes where a PS with k servers beats every allreduce")
    for n in ns:
        if n % L or n < 2:
            continue
        H = max(1, n // L)
        ring = lambda s: m.predict(p, "ring", n, H, L, s, rate, links=links)
        rd = lambda s: m.predict(p, "rd", n, H, L, s, rate, links=links)
        line = "n=%d: rd->ring at %s" % (n, fmt_opt(crossover_size(lambda s: ring(s) < rd(s))))
        if L > 1 and H > 1:
            hier = lambda s: m.predict(p, "hier", n, H, L, s, rate, links=links)
            line += ", ring->hier at %s" % fmt_opt(crossover_size(lambda s: hier(s) < ring(s)))
        best = lambda s: min(times(p, n, L, s, rate, [], links)[0].values())
        wins = ["k=%d %s" % (k, ranges(lambda s, k=k: m.predict(p, "ps", n, n, 1, s, rate, k,
                                                                links=links) < best(s)))
                for k in ks if k <= n]
        print(line + "; ps wins: " + "; ".join(wins))


def fmt_opt(s):
    return m.human(s) if s else "never (within 1 KiB..10 GiB)"


def svg_plot(path, title, xlabel, ylabel, series):
    """Log-log line plot: series = {name: [(x, y), ...]}."""
    W, Hh, L, R, T, B = 640, 420, 80, 130, 40, 50
    pts = [xy for s in series.values() for xy in s if xy[1] > 0]
    x0, x1 = min(x for x, _ in pts), max(x for x, _ in pts)
    y0, y1 = min(y for _, y in pts), max(y for _, y in pts)
    lx0, lx1 = math.floor(math.log10(x0)), math.ceil(math.log10(x1))
    ly0, ly1 = math.floor(math.log10(y0)), math.ceil(math.log10(y1))
    lx1 += lx1 == lx0
    ly1 += ly1 == ly0
    X = lambda x: L + (math.log10(x) - lx0) / (lx1 - lx0) * (W - L - R)
    Y = lambda y: Hh - B - (math.log10(y) - ly0) / (ly1 - ly0) * (Hh - T - B)
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
         'font-size="12"><rect width="100%%" height="100%%" fill="white"/>' % (W, Hh),
         '<text x="%d" y="20" font-size="14">%s</text>' % (L, title)]
    for e in range(lx0, lx1 + 1):
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>'
                 '<text x="%.1f" y="%d" text-anchor="middle">1e%d</text>'
                 % (X(10 ** e), T, X(10 ** e), Hh - B, X(10 ** e), Hh - B + 16, e))
    for e in range(ly0, ly1 + 1):
        o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                 '<text x="%d" y="%.1f" text-anchor="end">1e%d</text>'
                 % (L, Y(10 ** e), W - R, Y(10 ** e), L - 6, Y(10 ** e) + 4, e))
    o.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((W - R + L) / 2, Hh - 12,
                                                                    xlabel))
    o.append('<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">%s</text>'
             % (Hh / 2, Hh / 2, ylabel))
    for i, (name, s) in enumerate(series.items()):
        shades = ["#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]  # one per PS k
        color = COLORS.get(name, shades[i % len(shades)])
        line = " ".join("%.1f,%.1f" % (X(x), Y(y)) for x, y in s if y > 0)
        o.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (color, line))
        o.append('<text x="%d" y="%d" fill="%s">%s</text>' % (W - R + 8, T + 16 * i + 10, color,
                                                               name))
    o.append("</svg>\n")
    with open(path, "w") as f:
        f.write("\n".join(o))


def plots(p, rate, L, ns, sizes, ks, d, transport, links=1):
    os.makedirs(d, exist_ok=True)
    mid_size = 64 << 20
    nfix = 64 if 64 % L == 0 else L * 32
    ns_all = sorted({n for n in list(ns) + [2 ** i for i in range(1, 14)] + [10000]
                     if n % L == 0 and 2 <= n <= 10000})
    grid = [2 ** (e / 2) for e in range(20, 67)]  # 1 KiB .. 8 GiB, 2 points per octave
    by_n, by_size, bus = {}, {}, {}
    for n in ns_all:
        t, ps = times(p, n, L, mid_size, rate, ks, links)
        for a, v in list(t.items()) + [("ps(k=%d)" % k, v) for k, v in ps.items()]:
            by_n.setdefault(a, []).append((n, v))
    for s in grid:
        t, ps = times(p, nfix, L, s, rate, ks, links)
        for a, v in list(t.items()) + [("ps(k=%d)" % k, v) for k, v in ps.items()]:
            by_size.setdefault(a, []).append((s, v))
            bus.setdefault(a, []).append((s, 2 * (nfix - 1) / nfix * s / v / 1e9))
    tag = "%s, %g Gbit/s, %d/host" % (transport, rate / 1e9, L)
    if links > 1:
        tag += ", %d links" % links
    svg_plot(os.path.join(d, "time_vs_n.svg"), "allreduce of 64 MiB: time vs ranks (%s)" % tag,
             "ranks n", "seconds", by_n)
    svg_plot(os.path.join(d, "time_vs_size.svg"), "n = %d: time vs size (%s)" % (nfix, tag),
             "bytes", "seconds", by_size)
    svg_plot(os.path.join(d, "busbw_vs_size.svg"), "n = %d: busbw vs size (%s)" % (nfix, tag),
             "bytes", "GB/s", bus)
    print("# plots: %s/{time_vs_n,time_vs_size,busbw_vs_size}.svg" % d)


def incast_report(p, transport, N, rate, links, sizes, window, resent, queue, cores):
    """N senders into one receiver (gw_model_net.incast), the lone sender, and a BSP PS round of
    1 server and N workers on the same links."""
    import gw_model_net as net
    print("# gw-model incast: %s, %d -> 1, links %s of %g Gbit/s, re-sent %.0f %%, queue %g ms; "
          "kappa %.3f, buffer %.2f MB, stripe_loss %.4f" % (
              transport, N, links, rate / 1e9, resent * 100, queue * 1e3, p["kappa"],
              p.get("buffer_bytes", 0) / 1e6, p.get("stripe_loss", 0)))
    print("| size | goodput | of downlink | share | p50 | p99 | p99 alone | p99 ratio | PS round |")
    print("|---|---|---|---|---|---|---|---|---|")
    K = links if isinstance(links, list) else [links] * (N + 1)
    for s in sizes:
        a = net.incast(p, N, s, rate, window, K, resent, queue, cores)
        one = net.incast(p, 1, s, rate, window, K[:2], 0.0, queue, cores)
        ps = m.predict(p, "ps", N, N + 1, 1, s, rate, 1, share=1 / cores, links=K)
        print("| %s | %.3g Gbit/s | %.2f | 1/%d | %s | %s | %s | %.1f | %s |" % (
            m.human(s), a["goodput"] * 8e-9, a["of_link"], N, m.fmt_time(a["p50"]),
            m.fmt_time(a["p99"]), m.fmt_time(one["p99"]), a["p99"] / one["p99"], m.fmt_time(ps)))
