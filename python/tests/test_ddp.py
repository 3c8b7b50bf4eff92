"""DistributedDataParallel through gradwire trains exactly as through gloo: 50 steps of an MLP
with BatchNorm and of a model with an unused branch (find_unused_parameters=True); per-step
losses and final parameters equal (bit-exact on 2 ranks, 1e-6 relative on 4). The same run
over DPDK memif (2 processes: server and client) on 2 ranks."""
import os
import shutil
import subprocess

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from gw_testutil import init, spawn

STEPS = 50


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Linear(32, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


class Unused(nn.Module):
    """The `spare` branch only runs on odd steps: DDP must find the unused parameters."""

    def __init__(self):
        super().__init__()
        self.a, self.spare, self.b = nn.Linear(16, 24), nn.Linear(24, 24), nn.Linear(24, 4)

    def forward(self, x, step):
        h = torch.relu(self.a(x))
        if step % 2:
            h = h + torch.relu(self.spare(h))
        return self.b(h)


def train(kind, rank):
    torch.manual_seed(0)
    model = Mlp() if kind == "bn" else Unused()
    ddp = DDP(model, find_unused_parameters=(kind == "unused"), bucket_cap_mb=0.002)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(100 + rank)
    losses = []
    for step in range(STEPS):
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)
        out = ddp(x) if kind == "bn" else ddp(x, step)
        loss = nn.functional.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().clone())
    return torch.stack(losses), [p.detach().clone() for p in model.parameters()]


def run_ddp(rank, n, tmpdir, kinds, transport):
    if transport:
        os.environ["GW_TRANSPORT"] = transport
    for kind in kinds:
        init("gloo", rank, n, tmpdir, f"gloo-{kind}")
        ref_losses, ref_params = train(kind, rank)
        dist.destroy_process_group()
        init("gradwire", rank, n, tmpdir, f"gw-{kind}")
        losses, params = train(kind, rank)
        dist.destroy_process_group()
        if n == 2:
            assert torch.equal(losses, ref_losses), f"{kind}: losses differ from gloo"
            for p, q in zip(params, ref_params):
                assert torch.equal(p, q), f"{kind}: parameters differ from gloo"
        else:
            # Summation order differs from gloo's: 1e-6 relative to each tensor's scale.
            torch.testing.assert_close(losses, ref_losses, rtol=1e-6, atol=0)
            for p, q in zip(params, ref_params):
                err = (p - q).abs().max().item()
                assert err <= 1e-6 * q.abs().max().item(), f"{kind}: parameter error {err}"


@pytest.mark.parametrize("n", [2, 4])
def test_ddp_matches_gloo_tcp(n):
    spawn(run_ddp, n, ["bn", "unused"], "tcp:iface=lo")


def dpdk_usable():
    """The same probe as the dpdk suite: a memif pair needs the DPDK driver in the build."""
    build = os.environ.get("GW_BUILD_DIR", "")
    probe = os.path.join(build, "apps", "gw-perf", "gw-perf")
    return os.path.exists(probe) or os.path.exists(os.path.join(build, "drivers",
                                                                "libgw_drv_dpdk.a"))


@pytest.mark.skipif(not dpdk_usable(), reason="gradwire built without the dpdk driver")
def test_ddp_matches_gloo_dpdk_memif(tmp_path):
    sock = tmp_path / "memif.sock"
    spawn(run_ddp, 2, ["bn"], f"dpdk:vdev=net_memif0,role=auto,socket={sock}")
