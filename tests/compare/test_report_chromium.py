"""--report renders in headless Chromium and shows every column that ran: the page's own
script lists the columns it finds in the table and the SVG plots (body data-shown), and the
DOM Chromium dumps after running it must name each of them."""
import os
import re
import shutil
import subprocess
import sys
import tempfile

from compare_test_util import BUILD, run_compare

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run"]


def main():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("chromium is missing (usertools/gw-deps.sh installs it)")
        return 77
    ts = "tcp,tcp-busy"
    if os.path.exists(os.path.join(BUILD, "drivers/libgw_drv_dpdk.a")):
        ts += ",memif"
    out = tempfile.mkdtemp(prefix="gwc-report-")
    rc, doc, text = run_compare("--quick", "-t", ts, "-w", "lat_64,lat_4k,bw_64k,bw_1m",
                                "--refs", "sockperf", "--report", out)
    print(text)
    if rc != 0 or doc is None:
        print("FAIL: gw-compare exit %s" % rc)
        return 1
    ran = [c["label"] for c in doc["columns"] if c["status"] == "ran"]
    profile = tempfile.mkdtemp(prefix="gwc-chromium-")
    r = subprocess.run([browser] + CHROMIUM_FLAGS + ["--user-data-dir=" + profile, "--dump-dom",
                        "file://" + os.path.join(out, "index.html")],
                       capture_output=True, text=True, timeout=90)
    shutil.rmtree(profile, ignore_errors=True)
    m = re.search(r'data-shown="([^"]*)"', r.stdout)
    shown = set(m.group(1).split(",")) if m else set()
    print("ran:", ran, "\nshown by Chromium:", sorted(shown))
    fails = [c for c in ran if c not in shown]
    if not m:
        print("FAIL: Chromium's DOM has no data-shown (script not run?)\n", r.stderr[-500:])
        return 1
    if len(ran) < 2 or fails:
        print("FAIL: columns that ran but are not shown: %s" % fails)
        return 1
    shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
