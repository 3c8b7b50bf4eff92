"""The results document, and its terminal table and CSV. Transports are columns, workloads rows;
under each workload's speed come its costs. A column that could not run is listed under the
table with its reason."""
import io
import csv as _csv

import gwc_workloads as W

# (key, label, kinds) of the cost lines under each workload; per GiB only where bytes dominate;
# none under idle (its row is a cost already).
_MSGS = ("lat", "bw", "rate", "coll")
COST_LINES = [
    ("cpu_us_per_msg", "  cpu us/msg (usr+sys)", _MSGS),
    ("cpu_s_per_GiB", "  cpu s/GiB", ("bw", "coll")),
    ("syscalls_per_msg", "  syscalls/msg", _MSGS),
    ("ctxsw_per_msg", "  ctx switches/msg", _MSGS),
]


def document(meta, transports, refs, results):
    cols = []
    for t in transports:
        cols.append({"name": t.name, "label": t.label, "kind": "gradwire",
                     "status": "ran" if results.get(t.name) else "not run",
                     "why": t.why, "commands": t.commands, "errors": t.errors,
                     "driver_counters": t.stats, "results": results.get(t.name, {})})
    cols.extend(refs)
    return {"meta": meta, "columns": cols,
            "workloads": [vars(w) for w in W.WORKLOADS],
            "units": {"cpu_us_per_msg": "CPU microseconds per message, both ranks together",
                      "cpu_s_per_GiB": "CPU seconds per GiB delivered, both ranks",
                      "syscalls_per_msg": "system calls per message, both ranks",
                      "ctxsw_per_msg": "context switches per message, both ranks",
                      "bytes_copied": "not measured: no driver counts bytes it copies "
                                      "(dpdk counts copied vs zero-copy packets: "
                                      "driver_counters)"}}


def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 100:
        return "%.0f" % v
    if a >= 10:
        return "%.1f" % v
    if a >= 1:
        return "%.2f" % v
    if a >= 0.01:
        return "%.3f" % v
    return "%.2g" % v


def speed_cell(r):
    if not r:
        return "-"
    spread = (r["max"] - r["min"]) / 2 / r["median"] * 100 if r["median"] else 0
    return "%s ±%.0f%%" % (fmt(r["median"]), spread) if r["n"] > 1 else fmt(r["median"])


def cost_cell(r, key):
    c = (r or {}).get("cost", {})
    if key == "cpu_us_per_msg" and "user_us_per_msg" in c:
        return "%s+%s" % (fmt(c["user_us_per_msg"]), fmt(c["sys_us_per_msg"]))
    return fmt(c.get(key))


def ran(doc):
    return [c for c in doc["columns"] if c["status"] == "ran"]


def table(doc):
    cols = ran(doc)
    width = max([14] + [len(c["label"]) + 2 for c in cols])
    out = io.StringIO()
    m = doc["meta"]
    out.write("gw-compare  %s  %s, %s CPUs, kernel %s, load %s\n" % (
        m["date"], m["cpu_model"], m["cpus"], m["kernel"], m["load_before"]))
    out.write("%-30s" % "workload" + "".join(c["label"].rjust(width) for c in cols) + "\n")
    for w in doc["workloads"]:
        rs = [c["results"].get(w["id"]) for c in cols]
        if not any(rs):
            continue
        out.write("%-30s" % ("%s [%s]" % (w["label"], w["unit"]))
                  + "".join(speed_cell(r).rjust(width) for r in rs) + "\n")
        for key, label, kinds in COST_LINES:
            if kinds and w["kind"] not in kinds:
                continue
            cells = [cost_cell(r, key) for r in rs]
            if any(x != "-" for x in cells):
                out.write("%-30s" % label + "".join(x.rjust(width) for x in cells) + "\n")
    out.write("median of %s round(s), ±: half the min..max spread; costs: medians, both ranks "
              "together; msg = one message delivered (ping-pong iteration = 2), allreduce = "
              "one operation\n" % m["rounds"])
    if m.get("syscalls_not_counted"):
        out.write("syscalls not counted: %s\n" % m["syscalls_not_counted"])
    for c in doc["columns"]:
        if c["status"] != "ran":
            out.write("not run: %-22s %s\n" % (c["label"], c.get("why") or "?"))
        elif c.get("errors"):
            out.write("errors:  %-22s %s\n" % (c["label"], c["errors"][0][:160]))
    return out.getvalue()


def csv(doc):
    out = io.StringIO()
    wr = _csv.writer(out)
    keys = ["cpu_us_per_msg", "user_us_per_msg", "sys_us_per_msg", "cpu_s_per_GiB",
            "syscalls_per_msg", "ctxsw_per_msg", "vcsw_per_msg", "ivcsw_per_msg"]
    wr.writerow(["column", "kind", "workload", "unit", "median", "min", "max", "rounds"] + keys)
    for c in doc["columns"]:
        if c["status"] != "ran":
            wr.writerow([c["name"], c["kind"], "", "", "", "", "", 0] + [""] * len(keys)
                        + ["not run: " + (c.get("why") or "")])
            continue
        for w in doc["workloads"]:
            r = c["results"].get(w["id"])
            if r:
                wr.writerow([c["name"], c["kind"], w["id"], w["unit"], r["median"], r["min"],
                             r["max"], r["n"]] + [r["cost"].get(k, "") for k in keys])
    return out.getvalue()


def markdown(doc):
    """The table as Markdown (README, BENCHMARKS.md): speed in bold, costs under it."""
    cols = ran(doc)
    m = doc["meta"]
    out = ["| workload | " + " | ".join(c["label"] for c in cols) + " |",
           "|---|" + "---:|" * len(cols)]
    for w in doc["workloads"]:
        rs = [c["results"].get(w["id"]) for c in cols]
        if not any(rs):
            continue
        out.append("| **%s** [%s] | " % (w["label"], w["unit"]) +
                   " | ".join("**%s**" % speed_cell(r) if r else "–" for r in rs) + " |")
        for key, label, kinds in COST_LINES:
            if kinds and w["kind"] not in kinds:
                continue
            cells = [cost_cell(r, key) for r in rs]
            if any(x != "-" for x in cells):
                out.append("| %s | " % label.strip() +
                           " | ".join(x.replace("-", "–") if x == "-" else x for x in cells)
                           + " |")
    notes = ["", "%s; %s, %s CPUs, kernel %s; load before the run %s; commit %s; `%s`" % (
        m["date"], m["cpu_model"], m["cpus"], m["kernel"], m["load_before"], m.get("commit"),
        m["command"])]
    for c in doc["columns"]:
        if c["status"] != "ran":
            notes.append("- not run: %s — %s" % (c["label"], c.get("why")))
    return "\n".join(out + notes) + "\n"
