#!/usr/bin/env python3
"""Count meson test results from testlog.json. A skipped suite counts as failed: every suite
this machine can run must run. Prints 'N passed, N failed'; exit status 1 if any failed."""
import json
import sys

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
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
