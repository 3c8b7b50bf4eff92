"""The side-by-side table of PyTorch's DistributedTest suite: gradwire and gloo per world size,
from the JSON outcome files dist_suite.py writes (GW_SUITE_JSON).

    suite_table.py DIR      # DIR holds gradwire-2.json, gloo-2.json, gradwire-3.json, ...

Prints markdown: the counts per backend and world size, every test whose outcome differs, and
gradwire's tests that do not pass grouped by reason. Exit status 1 when a test that passes on
gloo does not pass on gradwire.
"""
import collections
import json
import os
import re
import sys


def load(d, backend, ws):
    p = os.path.join(d, f"{backend}-{ws}.json")
    return json.load(open(p)) if os.path.exists(p) else None


def reason(outcome):
    kind, detail = outcome
    text = " ".join(detail) or kind
    text = re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "N \\2", text)  # group timings
    return f"{kind}: {text[:150]}"


def main(d):
    sizes = sorted({int(f.split("-")[1].split(".")[0]) for f in os.listdir(d)
                    if f.endswith(".json") and "-" in f})
    regress = 0
    print("| world size | backend | pass | fail | error | skip |")
    print("|---|---|---|---|---|---|")
    for ws in sizes:
        for b in ("gloo", "gradwire"):
            r = load(d, b, ws)
            if r is None:
                print(f"| {ws} | {b} | not run | | | |")
                continue
            c = collections.Counter(v[0] for v in r.values())
            print(f"| {ws} | {b} | {c['pass']} | {c['fail']} | {c['error']} | {c['skip']} |")
    for ws in sizes:
        gl, gw = load(d, "gloo", ws), load(d, "gradwire", ws)
        if gw is None:
            continue
        print(f"\n### WORLD_SIZE {ws}\n")
        if gl is not None:
            diff = [(t, gl.get(t, ["not run", []])[0], o[0]) for t, o in sorted(gw.items())
                    if gl.get(t, ["not run", []])[0] != o[0]]
            print("| test | gloo | gradwire |\n|---|---|---|")
            for t, a, b in diff:
                print(f"| {t} | {a} | {b} |")
                regress += a == "pass"
        groups = collections.defaultdict(list)
        for t, o in sorted(gw.items()):
            if o[0] != "pass":
                groups[reason(o)].append(t)
        print("\ngradwire's tests that do not pass, by reason:\n")
        print("| reason | tests |\n|---|---|")
        for why, ts in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(ts[:4]) + (f" and {len(ts) - 4} more" if len(ts) > 4 else "")
            print(f"| {why.replace('|', '/')} | {len(ts)}: {shown} |")
    print(f"\n{regress} tests pass on gloo and not on gradwire")
    return 1 if regress else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
