"""The idle row (issue 39): while both ranks compute (no call), gw-compare reports the CPU their
progress threads take, from the ranks' own counters. The thread sleeps between events, so it
is a few percent of a core at most; a thread that spun would show ~100 % per rank."""
import sys

from compare_test_util import run_compare


def main():
    rc, doc, text = run_compare("--quick", "-t", "tcp", "-w", "idle")
    print(text)
    cols = {c["name"]: c for c in (doc or {}).get("columns", [])}
    r = cols.get("tcp", {}).get("results", {}).get("idle")
    if rc != 0 or not r:
        print("FAIL: gw-compare exit %s, no idle row for tcp: %s" % (rc, cols.get("tcp")))
        return 1
    v = r["median"]
    if not 0 <= v < 25:
        print("FAIL: idle ranks took %.1f %% of a core (a spinning thread?)" % v)
        return 1
    if "idle ranks' CPU [% core]" not in text:
        print("FAIL: the table has no idle row")
        return 1
    print("idle ranks (both): %.2f %% of a core" % v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
