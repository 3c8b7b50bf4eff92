"""Open MPI and Gloo beside gradwire on the allreduce row: with their drivers built
(apps/gw-baseline), one quick ar_4k round gives each a time and its system calls per
allreduce; without, each column is listed with the reason (the package to install)."""
import os
import sys

from compare_test_util import BUILD, run_compare

LABELS = {"openmpi": "Open MPI (tcp)", "gloo": "Gloo (tcp)"}
EXES = {"openmpi": "gw-baseline-mpi", "gloo": "gw-baseline-gloo"}


def main():
    rc, doc, text = run_compare("--quick", "-t", "tcp", "-w", "ar_4k", "--refs",
                                "openmpi,gloo")
    print(text)
    cols = {c["name"]: c for c in (doc or {}).get("columns", [])}
    fails = [] if rc == 0 else ["gw-compare exit %s" % rc]
    for name, label in LABELS.items():
        c = cols.get(name)
        built = os.path.exists(os.path.join(BUILD, "apps/gw-baseline", EXES[name]))
        if not c or c.get("label") != label:
            fails.append("no %s column: %s" % (label, list(cols)))
        elif not built:
            if c["status"] == "ran" or EXES[name] not in (c.get("why") or ""):
                fails.append("%s without its driver, not listed with why: %s" % (name, c))
        elif c["status"] != "ran" or "ar_4k" not in c["results"]:
            fails.append("%s did not run ar_4k: %s" % (name, c.get("why") or c.get("errors")))
        else:
            r = c["results"]["ar_4k"]
            if not r["median"] > 0 or r["cost"].get("syscalls_per_msg") is None:
                fails.append("%s ar_4k: time %s, syscalls/msg %s" % (
                    name, r["median"], r["cost"].get("syscalls_per_msg")))
    for f in fails:
        print("FAIL:", f)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
