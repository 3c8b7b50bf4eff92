"""Small inline-SVG charts (no library: the report must be one self-contained file)."""
import html
import math

PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22"]
W, H, L, R, T, B = 560, 300, 64, 150, 28, 44  # size and margins


def _esc(s):
    return html.escape(str(s), quote=True)


def _ticks_log(lo, hi):
    lo, hi = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    if lo == hi:
        hi += 1
    return [10.0 ** e for e in range(lo, hi + 1)]


def _fmt(v):
    if v >= 1e6:
        return "%gM" % (v / 1e6)
    if v >= 1e3:
        return "%gk" % (v / 1e3)
    return "%g" % v


def _frame(title, ylabel, xlabel):
    return ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
            'font-family="sans-serif" font-size="11">' % (W, H),
            '<text x="%d" y="16" font-size="13" font-weight="bold">%s</text>' % (L, _esc(title)),
            '<text x="12" y="%d" transform="rotate(-90 12 %d)" text-anchor="middle">%s</text>'
            % (T + (H - T - B) // 2, T + (H - T - B) // 2, _esc(ylabel)),
            '<text x="%d" y="%d" text-anchor="middle">%s</text>'
            % (L + (W - L - R) // 2, H - 6, _esc(xlabel))]


def _legend(names):
    out = []
    for i, n in enumerate(names):
        y = T + 14 * i
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>'
                   '<text x="%d" y="%d">%s</text>' % (W - R + 8, y, PALETTE[i % 10],
                                                      W - R + 22, y + 9, _esc(n)))
    return out


def line_chart(title, ylabel, xlabel, series, xlabels):
    """series: [(name, [(x, y)...])] on log-log axes; xlabels: {x: text}."""
    pts = [p for _, s in series for p in s if p[1] and p[1] > 0]
    if not pts:
        return ""
    xs = sorted(xlabels)
    ylo, yhi = min(p[1] for p in pts), max(p[1] for p in pts)
    yt = _ticks_log(ylo, yhi)
    lx0, lx1 = math.log10(xs[0]), math.log10(xs[-1]) if len(xs) > 1 else math.log10(xs[0]) + 1
    ly0, ly1 = math.log10(yt[0]), math.log10(yt[-1])
    X = lambda x: L + (math.log10(x) - lx0) / ((lx1 - lx0) or 1) * (W - L - R)
    Y = lambda y: H - B - (math.log10(y) - ly0) / ((ly1 - ly0) or 1) * (H - T - B)
    out = _frame(title, ylabel, xlabel)
    for v in yt:
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                   '<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (L, W - R, Y(v), Y(v), L - 4, Y(v) + 4, _fmt(v)))
    for x in xs:
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (X(x), H - B + 14, _esc(xlabels[x])))
    for i, (name, s) in enumerate(series):
        s = [p for p in s if p[1] and p[1] > 0]
        c = PALETTE[i % 10]
        if len(s) > 1:
            out.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                       % (c, " ".join("%.1f,%.1f" % (X(x), Y(y)) for x, y in s)))
        for x, y in s:
            out.append('<circle data-col="%s" cx="%.1f" cy="%.1f" r="3" fill="%s">'
                       '<title>%s: %g</title></circle>' % (_esc(name), X(x), Y(y), c,
                                                           _esc(name), y))
    out += _legend([n for n, _ in series])
    return "\n".join(out + ["</svg>"])


def bar_chart(title, ylabel, groups, names, values, log=False, stack=None):
    """Grouped bars: values[(group, name)] = y, or with `stack` (list of part names) a list of
    part values per bar, stacked. Log scale for values spanning decades."""
    flat = [sum(v) if stack else v for v in values.values() if v]
    flat = [v for v in flat if v and v > 0]
    if not flat:
        return ""
    legend = stack or names
    if log:
        yt = _ticks_log(min(flat), max(flat))
        y0, y1 = math.log10(yt[0]), math.log10(yt[-1])
        Y = lambda y: H - B - (math.log10(max(y, yt[0])) - y0) / ((y1 - y0) or 1) * (H - T - B)
    else:
        top = max(flat) * 1.1
        yt = [top * i / 4 for i in range(5)]
        Y = lambda y: H - B - y / top * (H - T - B)
    out = _frame(title, ylabel, "")
    for v in yt:
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>'
                   '<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (L, W - R, Y(v), Y(v), L - 4, Y(v) + 4, _fmt(round(v, 3))))
    gw = (W - L - R) / max(len(groups), 1)
    bw = gw * 0.8 / max(1 if stack else len(names), 1)
    for gi, g in enumerate(groups):
        gx = L + gi * gw + gw * 0.1
        label_x = gx + gw * 0.4
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (label_x, H - B + 14, _esc(g)))
        for ni, n in enumerate([None] if stack else names):
            v = values.get((g, n)) if not stack else values.get((g, None))
            if not v:
                continue
            x = gx + ni * bw
            if stack:
                base = 0
                for pi, part in enumerate(v):
                    if part <= 0:
                        continue
                    out.append('<rect data-col="%s" x="%.1f" y="%.1f" width="%.1f" '
                               'height="%.1f" fill="%s"><title>%s %s: %.3g</title></rect>'
                               % (_esc(g), x, Y(base + part), bw * 0.9,
                                  max(Y(base) - Y(base + part), 0.5), PALETTE[pi % 10],
                                  _esc(g), _esc(stack[pi]), part))
                    base += part
            else:
                out.append('<rect data-col="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" '
                           'fill="%s"><title>%s %s: %.3g</title></rect>'
                           % (_esc(n), x, Y(v), bw * 0.9, max(H - B - Y(v), 0.5),
                              PALETTE[ni % 10], _esc(n), _esc(g), v))
    out += _legend(legend)
    return "\n".join(out + ["</svg>"])
