"""gradwire as a torch.distributed backend.

    import gradwire                     # registers the backend "gradwire"
    torch.distributed.init_process_group("gradwire", rank=r, world_size=n, init_method=...)

The transport comes from GW_TRANSPORT ("tcp" by default; "dpdk:vdev=net_memif0,role=auto,
socket=/tmp/gw.sock" for memif between two processes; "rdma"). CPU tensors only.
torch.distributed.monitored_barrier works on gradwire groups too (torch 1.13 allows gloo only;
importing gradwire lets it through for gradwire groups): rank 0 names the ranks that did not
arrive within the timeout, as gloo does.
A failed call raises RuntimeError whose text names the culprit ("[failed rank 3]");
failed_rank() gives it as a number, abort() breaks the group on every rank (any thread),
shrink() gives the survivors a new group over the same connections (the recipe is in
README.md, "When a rank fails").
The tensors of a call that failed are held by the backend until the group is destroyed
(its transport may still write into them); freeing them in Python is safe.
"""
import torch.distributed as dist

from . import _C
from ._C import create_process_group

__all__ = ["create_process_group", "failed_rank", "abort", "shrink"]


def _group(group):
    return group if group is not None else dist.distributed_c10d._get_default_group()


def failed_rank(group=None):
    """The rank that the group's first failed call blamed (dead, stopped or aborting peer),
    -1 when none was named."""
    return _C.failed_rank(_group(group))


def abort(group=None, reason=""):
    """Abort the group: calls in flight on this rank and every peer fail within ~200 ms with
    Aborted naming this rank. Callable from any thread; destroy the group afterwards."""
    _C.abort(_group(group), reason)


def shrink(group=None, exclude=()):
    """Go on without the ranks that failed: every surviving rank calls it after a call on
    `group` raised (a peer died, stopped or aborted). The survivors agree on who is gone --
    the ranks they saw fail, the ranks in `exclude` (group ranks) on any of them, and ranks
    that do not call within coll.shrink_wait_ms (10 s) -- and get a new process group of the
    survivors, ranks renumbered in order, over the same connections (no rendezvous). Use it
    like any group: DDP(model, process_group=new), dist.all_reduce(t, group=new); it is
    registered with torch.distributed (dist.get_rank(new), dist.get_world_size(new)). The
    old group refuses further calls. A rank the others excluded gets RuntimeError
    ("[excluded: ...]") and should exit."""
    c10d = dist.distributed_c10d
    old = _group(group)
    new = _C.shrink(old, list(exclude))
    parents = _C.parent_ranks(new)  # ranks of `old`
    old_ranks = c10d._pg_group_ranks.get(old)  # global rank -> rank in `old`
    to_global = {v: k for k, v in old_ranks.items()} if old_ranks else {}
    ranks = [to_global.get(p, p) for p in parents]
    c10d._pg_group_ranks[new] = {g: i for i, g in enumerate(ranks)}
    c10d._pg_map[new] = ("gradwire", c10d._pg_map[old][1] if old in c10d._pg_map else None)
    c10d._pg_names[new] = "gradwire-shrunk-" + "-".join(map(str, ranks))
    return new


def _create(store, rank, size, timeout):
    return create_process_group(store, rank, size, timeout)


def _monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier, also for gradwire groups (ProcessGroupGW
    implements monitoredBarrier with gloo's protocol and error texts)."""
    c10d = dist.distributed_c10d
    if c10d._rank_not_in_group(group):
        return None
    g = _group(group)
    if dist.get_backend(g) != "gradwire":
        return _torch_monitored_barrier(group, timeout, wait_all_ranks)
    if timeout is None:
        timeout = c10d.default_pg_timeout
    return g.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


if getattr(dist.monitored_barrier, "__module__", "") != __name__:
    _torch_monitored_barrier = dist.monitored_barrier
    dist.monitored_barrier = dist.distributed_c10d.monitored_barrier = _monitored_barrier

if "GRADWIRE" not in dist.Backend._plugins:
    dist.Backend.register_backend("gradwire", _create)
