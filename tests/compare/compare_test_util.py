"""Shared by the compare suite: the module path and a quick gw-compare run."""
import json
import os
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("GW_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
BUILD = os.environ.get("GW_BUILD_DIR", "build")
sys.path.insert(0, os.path.join(SOURCE, "apps/gw-compare"))


def run_compare(*args):
    """gw-compare with `args` and --json; returns (exit code, document, terminal text)."""
    out = tempfile.mktemp(suffix=".json")
    cmd = [sys.executable, os.path.join(SOURCE, "apps/gw-compare/gw_compare.py"),
           "--build-dir", BUILD, "--source-dir", SOURCE, "--json", out] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=170)
    sys.stderr.write(r.stderr)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
        os.unlink(out)
    return r.returncode, doc, r.stdout
