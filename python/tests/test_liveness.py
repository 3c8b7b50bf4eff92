"""A rank that computes 10 s outside gradwire between two steps (loading data, evaluating,
writing a checkpoint) is not taken for dead (issue 39): over DPDK memif, where nobody but the
transport's progress thread acks for it, and over TCP. An allreduce of its own is in flight
during the gap and its peer waits in the next one; every result is checked element by element.
With GW_TRANSPORT_PROGRESS=caller the memif row fails ("sent nothing for 1500 ms")."""
import os
import time

import pytest
import torch
import torch.distributed as dist

from gw_testutil import init, spawn
from test_ddp import dpdk_usable

GAP_S = 10


def run_gap(rank, n, tmpdir, transport):
    os.environ["GW_TRANSPORT"] = transport
    init("gradwire", rank, n, tmpdir, "gap")
    base = torch.arange(100_000, dtype=torch.float32)
    want = base * sum(r + 1 for r in range(n))
    x = base * (rank + 1)
    work = dist.all_reduce(x, async_op=True)
    if rank == 1:
        time.sleep(GAP_S)  # computes, no call into gradwire
    work.wait()
    assert torch.equal(x, want), "the allreduce in flight during the gap"
    y = torch.full((1000,), rank + 1, dtype=torch.int64)
    dist.all_reduce(y)
    assert torch.equal(y, torch.full((1000,), n * (n + 1) // 2, dtype=torch.int64))
    dist.barrier()
    dist.destroy_process_group()


def test_compute_gap_tcp():
    spawn(run_gap, 2, "tcp:iface=lo")


@pytest.mark.skipif(not dpdk_usable(), reason="gradwire built without the dpdk driver")
def test_compute_gap_dpdk_memif(tmp_path):
    spawn(run_gap, 2, f"dpdk:vdev=net_memif0,role=auto,socket={tmp_path / 'memif.sock'}")


@pytest.mark.skipif(not os.environ.get("GW_TEST_TORCH_RDMA"),
                    reason="needs an RDMA device: runs inside the soft-RoCE VM (meson test "
                           "rdma-vm sets GW_TEST_TORCH_RDMA=rdma:dev=rxe0 with GW_VM_TORCH=1)")
def test_compute_gap_rdma():
    spawn(run_gap, 2, os.environ["GW_TEST_TORCH_RDMA"])
