"""Shared helpers of the torch suite: ranks as spawned processes, one store per backend run."""
import datetime
import os
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def spawn(fn, n, *args):
    """Run fn(rank, n, tmpdir, *args) in n fresh processes; a rank's exception fails the test."""
    with tempfile.TemporaryDirectory(prefix="gw-torch-") as d:
        mp.spawn(fn, args=(n, d) + args, nprocs=n, join=True)


def init(backend, rank, n, tmpdir, name, timeout_s=60):
    """init_process_group over a FileStore private to this (test, backend) run."""
    import gradwire  # noqa: F401  (registers the backend)
    torch.set_num_threads(1)  # two cores shared by all ranks
    dist.init_process_group(backend, init_method="file://" + os.path.join(tmpdir, name),
                            rank=rank, world_size=n,
                            timeout=datetime.timedelta(seconds=timeout_s))
