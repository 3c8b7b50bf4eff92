"""The one place that says which of the DistributedTest suite's backend-name gates are opened
for gradwire, and why. The suite keeps many CPU tests for backends by name ("gloo", "MPI");
PyTorch opened the same gates when it added UCC. Each entry rewrites one gate's text in the
suite's source before the module is imported (checked: a gate that no longer matches fails
loudly rather than silently keeping the test skipped).
"""
import importlib.util
import sys

import torch.distributed as dist

SUITE = "torch.testing._internal.distributed.distributed_test"

# (gate text in distributed_test.py, the backends it names, why it is open for gradwire).
# Only CPU features: the CUDA gates stay closed (the backend takes CPU tensors only).
GATES = [
    ('@sandcastle_skip_if(BACKEND != "gloo", "Only gloo backend supports timeouts")',
     'BACKEND != "gloo"',
     "every gradwire call has a deadline (the group's timeout or the call's), barrier too"),
    ('BACKEND != "gloo", "Only Gloo backend support sparse all reduce"',
     'BACKEND != "gloo"',
     "sparse COO allreduce (SUM) as gloo does it: indices and values gathered and summed"),
    ('@sandcastle_skip_if(BACKEND != "gloo", "GLOO Batch Send Recv CPU")',
     'BACKEND != "gloo"',
     "batch_isend_irecv is isend/irecv with tags, which gradwire matches per (peer, tag)"),
    ('@require_backend({"gloo"})',
     '{"gloo"}',
     "allreduce_coalesced (a fused bucket), scatter_object_list and the monitored barrier "
     "(gloo's protocol and error texts)"),
    ('@require_backend(DistTestCases.backend_feature["gpu"])\n'
     '        @require_n_gpus_for_nccl_backend(',
     'DistTestCases.backend_feature["gpu"]',
     "the object collectives (all_gather_object, broadcast_object_list) on CPU tensors; the "
     "'gpu' set is nccl and gloo, which also run them on CPU"),
    ('@require_backend(DistTestCases.backend_feature["gpu"])\n'
     '        @with_dist_debug_levels(',
     'DistTestCases.backend_feature["gpu"]',
     "gather_object on CPU, as above"),
    ('BACKEND != "mpi", "Only MPI supports CPU all_to_all_single"',
     'BACKEND != "mpi"',
     "all_to_all_single with equal and unequal splits on CPU"),
    ('BACKEND != "mpi", "Only MPI supports all_to_all"',
     'BACKEND != "mpi"',
     "all_to_all of tensor lists"),
    ('BACKEND != "mpi" and BACKEND != "nccl" and BACKEND != "gloo",\n'
     '            "get_future is only supported on mpi, nccl and gloo"',
     'BACKEND != "mpi" and BACKEND != "nccl" and BACKEND != "gloo"',
     "every gradwire Work has get_future(), completed with the op's outputs"),
    ('if BACKEND == "mpi" or BACKEND == "gloo":',
     'BACKEND == "mpi" or BACKEND == "gloo"',
     "the CPU branch of the no_sync gradient-accumulation tests (the other is CUDA)"),
    ('BACKEND != "nccl" and BACKEND != "gloo",\n'
     '            "Only Nccl & Gloo backend support DistributedDataParallel"',
     'BACKEND != "nccl" and BACKEND != "gloo"',
     "DDP on CPU (also opened by DistTestCases.backend_feature['ddp'])"),
]
# DistTestCases feature sets gradwire joins: plugin (a registered third-party backend), ddp
# (DDP on CPU modules), subgroup (new_group of any ranks).
FEATURES = ("plugin", "ddp", "subgroup")


def _opened(cond):
    """The condition with gradwire added: `!=` chains skip unless gradwire, `==` ones run it."""
    if "backend_feature" in cond:
        return cond + ' | {"gradwire"}'
    if "{" in cond:
        return cond.replace("}", ', "gradwire"}')
    if "==" in cond:
        return cond + ' or BACKEND == "gradwire"'
    return cond + ' and BACKEND != "gradwire"'


def install(backend):
    """Register gradwire with the suite's feature sets and import the suite with its gates
    opened (backend gradwire), or as shipped (gloo)."""
    if backend != "gradwire":
        return
    import gradwire  # noqa: F401  (registers the backend)
    from torch.testing._internal import common_distributed as cd
    for feature in FEATURES:
        cd.DistTestCases.backend_feature[feature].add("gradwire")
    spec = importlib.util.find_spec(SUITE)
    src = open(spec.origin).read()
    for gate, cond, _why in GATES:
        if gate not in src:
            raise RuntimeError(f"gates.py: gate not found in {spec.origin}: {gate!r}")
        src = src.replace(gate, gate.replace(cond, _opened(cond)))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[SUITE] = mod
    exec(compile(src, spec.origin, "exec"), mod.__dict__)
