"""PyTorch's DistributedTest suite (torch.testing._internal.distributed.distributed_test) run
for one backend, as PyTorch's test/distributed/test_distributed_spawn.py runs it.

    BACKEND=gradwire WORLD_SIZE=2 /usr/bin/python3 dist_suite.py [-k PAT]

GW_SUITE_JSON=FILE writes every test's outcome (usertools/gw-torch-suite.sh builds the
side-by-side table from them); GW_SUITE_SUBSET=FILE runs the tests named there, each of which
must pass (CI: ci_subset.txt).

BACKEND is gradwire or gloo (the reference). For gradwire the suite's backend-name gates are
opened for the CPU features gradwire implements (gates.py: which, and why) before the suite's
module is imported; each test spawns WORLD_SIZE processes that import this file again.
"""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # expecttest stand-in, gates

import gates  # noqa: E402

if "TEMP_DIR" not in os.environ:  # set before the ranks are spawned: they inherit it
    import atexit
    import shutil
    import tempfile
    os.environ["TEMP_DIR"] = tempfile.mkdtemp(prefix="gw-dist-suite.")
    atexit.register(shutil.rmtree, os.environ["TEMP_DIR"], True)

# As PyTorch's run_test.py runs it "with file init_method" (test_barrier_timeout_global needs it).
os.environ.setdefault("INIT_METHOD", f"file://{os.environ['TEMP_DIR']}/shared_init_file")

gates.install(os.environ["BACKEND"])

from torch.testing._internal.common_utils import UNITTEST_ARGS, run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


class _Recorder(unittest.TextTestResult):
    """Each test's outcome (pass, fail, error, skip with its reason) for the side-by-side table."""
    outcomes = {}

    def _put(self, test, outcome, detail=""):
        _Recorder.outcomes[test._testMethodName] = [outcome, detail.strip().splitlines()[-1:]]

    def addSuccess(self, test):
        super().addSuccess(test)
        self._put(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._put(test, "fail", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._put(test, "error", self._exc_info_to_string(err, test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._put(test, "skip", reason)


def _run_subset(path):
    """CI: the named tests only, each of which must pass (a skip counts as a failure)."""
    names = [ln.strip() for ln in open(path) if ln.strip() and not ln.startswith("#")]
    cls = TestDistBackendWithSpawn.__name__
    runner = unittest.TextTestRunner(resultclass=_Recorder, verbosity=2)
    unittest.main(argv=[sys.argv[0]] + [f"{cls}.{n}" for n in names], testRunner=runner,
                  exit=False)
    bad = {n: _Recorder.outcomes.get(n, ["not run", []]) for n in names}
    bad = {n: o for n, o in bad.items() if o[0] != "pass"}
    for n, (outcome, detail) in sorted(bad.items()):
        print(f"NOT PASSED: {n}: {outcome} {' '.join(detail)}")
    print(f"{len(names) - len(bad)} of {len(names)} subset tests passed "
          f"(BACKEND={os.environ['BACKEND']}, WORLD_SIZE={os.environ['WORLD_SIZE']})")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    out = os.environ.get("GW_SUITE_JSON")
    if os.environ.get("GW_SUITE_SUBSET"):
        _run_subset(os.environ["GW_SUITE_SUBSET"])
    elif not out:
        run_tests()
    else:  # the full run (usertools/gw-torch-suite.sh): every outcome into a JSON file
        runner = unittest.TextTestRunner(resultclass=_Recorder, verbosity=2)
        unittest.main(argv=UNITTEST_ARGS, testRunner=runner, exit=False)
        with open(out, "w") as f:
            json.dump(_Recorder.outcomes, f, indent=1, sort_keys=True)
