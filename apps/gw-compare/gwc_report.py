"""--report DIR: one self-contained HTML page (inline SVG, no external file or script): plots,
the table, every command that produced a number, and the versions. A short inline script
records which columns the page shows (body data-shown) so a headless browser test can check
what was actually rendered."""
import html
import os

import gwc_output
import gwc_svg

CSS = """body{font-family:sans-serif;margin:24px;max-width:1200px;color:#222}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:right}th{background:#f3f3f3}td.l,th.l{text-align:left}tr.cost td{color:#555;
font-size:12px}.plots{display:flex;flex-wrap:wrap;gap:12px}code,pre{font-size:12px}
pre{background:#f7f7f7;padding:8px;overflow-x:auto}"""

SCRIPT = """document.addEventListener('DOMContentLoaded',function(){var s={};
document.querySelectorAll('th[data-col]').forEach(function(e){s[e.dataset.col]=1});
document.querySelectorAll('svg [data-col]').forEach(function(e){s[e.dataset.col]=1});
document.body.dataset.shown=Object.keys(s).sort().join(',');});"""


def _e(s):
    return html.escape(str(s))


def _series(cols, workloads, kind):
    ws = [w for w in workloads if w["kind"] == kind]
    out = []
    for c in cols:
        pts = [(w["size"], c["results"][w["id"]]["median"]) for w in ws if w["id"] in c["results"]]
        if pts:
            out.append((c["label"], pts))
    return out, {w["size"]: w["label"].split()[-2] + " " + w["label"].split()[-1] for w in ws}


def _cpu_per_byte(doc, cols):
    """ns per byte at 64 KiB bandwidth, stacked by profile category or user/system."""
    prof = doc["meta"].get("profile") or {}
    cats = prof.get("categories")
    values, groups = {}, []
    for c in cols:
        r = c["results"].get("bw_64k")
        if not r or r["cost"].get("cpu_s_per_GiB") is None:
            continue
        ns_b = r["cost"]["cpu_s_per_GiB"] / 2**30 * 1e9
        share = (prof.get("by_column") or {}).get(c["name"])
        if cats and prof.get("by_column") and not share:
            continue  # not profiled (a reference tool): its user/system split would mislead
        if cats and share:
            values[(c["label"], None)] = [ns_b * share.get(k, 0) for k in cats]
        elif "user_us_per_msg" in r["cost"]:
            u, s = r["cost"]["user_us_per_msg"], r["cost"]["sys_us_per_msg"]
            values[(c["label"], None)] = [ns_b * u / (u + s or 1), ns_b * s / (u + s or 1)]
        else:
            continue
        groups.append(c["label"])
    stack = cats if cats and any(
        c["name"] in (prof.get("by_column") or {}) for c in cols) else ["user", "system"]
    title = "CPU ns per byte, bandwidth 64 KiB, by %s" % (
        "category (perf record)" if stack is cats else "user / system")
    return gwc_svg.bar_chart(title, "ns per byte", groups, None, values, stack=stack)


def _syscalls(doc, cols):
    ws = [w for w in doc["workloads"] if w["kind"] in ("lat", "bw")]
    values = {}
    for c in cols:
        for w in ws:
            r = c["results"].get(w["id"])
            if r and r["cost"].get("syscalls_per_msg"):
                values[(w["id"], c["label"])] = r["cost"]["syscalls_per_msg"]
    return gwc_svg.bar_chart("System calls per message (log scale)", "syscalls / msg",
                             [w["id"] for w in ws], [c["label"] for c in cols], values, log=True)


def _table(doc, cols):
    rows = ['<table><tr><th class="l">workload</th>%s</tr>' % "".join(
        '<th data-col="%s">%s</th>' % (_e(c["label"]), _e(c["label"])) for c in cols)]
    for w in doc["workloads"]:
        rs = [c["results"].get(w["id"]) for c in cols]
        if not any(rs):
            continue
        rows.append('<tr><td class="l"><b>%s</b> [%s]</td>%s</tr>' % (
            _e(w["label"]), _e(w["unit"]), "".join(
                "<td><b>%s</b></td>" % _e(gwc_output.speed_cell(r)) for r in rs)))
        for key, label, kinds in gwc_output.COST_LINES:
            if kinds and w["kind"] not in kinds:
                continue
            cells = [gwc_output.cost_cell(r, key) for r in rs]
            if any(x != "-" for x in cells):
                rows.append('<tr class="cost"><td class="l">%s</td>%s</tr>' % (
                    _e(label.strip()), "".join("<td>%s</td>" % _e(x) for x in cells)))
    rows.append("</table>")
    return "\n".join(rows)


def render(doc):
    cols = gwc_output.ran(doc)
    m = doc["meta"]
    lat, lat_x = _series(cols, doc["workloads"], "lat")
    bw, bw_x = _series(cols, doc["workloads"], "bw")
    plots = [gwc_svg.line_chart("Ping-pong latency (half round trip)", "us", "message size",
                                lat, lat_x),
             gwc_svg.line_chart("Unidirectional bandwidth", "Gbit/s", "message size", bw, bw_x),
             _cpu_per_byte(doc, cols), _syscalls(doc, cols)]
    body = ["<h1>gw-compare: the protocol stack's cost, transport by transport</h1>",
            "<p>%s &middot; %s &middot; %s CPUs &middot; kernel %s &middot; load %s &middot; "
            "commit %s</p>" % (_e(m["date"]), _e(m["cpu_model"]), m["cpus"], _e(m["kernel"]),
                               _e(m["load_before"]), _e(m.get("commit"))),
            "<p><code>%s</code></p>" % _e(m["command"]),
            '<div class="plots">%s</div>' % "".join(p for p in plots if p),
            "<h2>Speed and cost</h2>", _table(doc, cols),
            "<p>%s</p>" % _e(m["method"]),
            "<ul>%s</ul>" % "".join("<li><b>%s</b>: %s</li>" % (_e(k), _e(v))
                                    for k, v in doc["units"].items())]
    missing = [c for c in doc["columns"] if c["status"] != "ran"]
    if missing:
        body.append("<h2>Not run</h2><ul>%s</ul>" % "".join(
            "<li><b>%s</b>: %s</li>" % (_e(c["label"]), _e(c.get("why"))) for c in missing))
    body.append("<h2>Commands</h2>")
    for c in doc["columns"]:
        if c["commands"]:
            body.append("<h3>%s</h3><pre>%s</pre>" % (_e(c["label"]),
                                                      _e("\n".join(c["commands"]))))
        if c.get("errors"):
            body.append("<p>errors: %s</p>" % _e("; ".join(c["errors"][:3])))
        if c.get("driver_counters"):
            body.append("<details><summary>driver counters (--stats, all runs)</summary><pre>%s"
                        "</pre></details>" % _e("\n".join(
                            "%s %s" % kv for kv in sorted(c["driver_counters"].items()))))
    body.append("<h2>Versions</h2><pre>%s</pre>" % _e("\n".join(
        "%s: %s" % kv for kv in m["versions"].items())))
    if (m.get("profile") or {}).get("table"):
        body.append("<h2>Profile categories</h2><pre>%s</pre>" % _e(m["profile"]["table"]))
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>gw-compare %s</title>"
            "<style>%s</style><script>%s</script></head><body>%s</body></html>\n"
            % (_e(m["date"]), CSS, SCRIPT, "\n".join(body)))


def write(doc, outdir):
    os.makedirs(outdir, exist_ok=True)
    path = os.path.join(outdir, "index.html")
    with open(path, "w") as f:
        f.write(render(doc))
    return path
