#!/usr/bin/env python3
"""Count meson test results from testlog.json. A skipped suite counts as failed: every suite
this machine can run must run. Prints 'N passed, N failed'; exit status 1 if any failed.
For each failure it repeats the test's own failure lines (gtest's "Failure" and what follows,
"[  FAILED  ]"), so that the tail of a CI log says which case failed and why."""
import json
import re
import sys

# gtest's failure lines, pytest's and Python's, a shell test's "error:"; not test names.
FAILED = re.compile(r": Failure$|\[  FAILED  \]|\berror:|^E   |Traceback|^FAIL")


def failure_lines(out, limit=24):
    """The lines of a test's output that say what failed (gtest, pytest, shell tests)."""
    lines = (out or "").splitlines()
    idx = set()
    for i, ln in enumerate(lines):
        if FAILED.search(ln):
            idx.update(range(i, min(i + 4, len(lines))) if ln.endswith(": Failure") else [i])
    keep = [lines[i] for i in sorted(idx)]
    if not keep:
        keep = lines[-8:]
    return keep[:limit]

passed, failed = 0, 0
for path in sys.argv[1:]:
    try:
        f = open(path)
    except OSError as e:
        failed += 1
        print(f"FAILED: no test results ({e}); the build or meson setup failed", file=sys.stderr)
        continue
    with f:
        for line in f:
            r = json.loads(line)
            if r["result"] in ("OK", "EXPECTEDFAIL"):
                passed += 1
            else:
                failed += 1
                print(f"FAILED: {r['name']} ({r['result']})", file=sys.stderr)
                for ln in failure_lines((r.get("stdout") or "") + (r.get("stderr") or "")):
                    print(f"    {ln[:200]}", file=sys.stderr)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
