"""gradwire as a torch.distributed backend.

    import gradwire                     # registers the backend "gradwire"
    torch.distributed.init_process_group("gradwire", rank=r, world_size=n, init_method=...)

The transport comes from GW_TRANSPORT ("tcp" by default; "dpdk:vdev=net_memif0,role=auto,
socket=/tmp/gw.sock" for memif between two processes; "rdma"). CPU tensors only.
A failed call raises RuntimeError whose text names the culprit ("[failed rank 3]");
failed_rank() gives it as a number, abort() breaks the group on every rank (any thread).
The tensors of a call that failed are held by the backend until the group is destroyed
(its transport may still write into them); freeing them in Python is safe.
"""
import torch.distributed as dist

from . import _C
from ._C import create_process_group

__all__ = ["create_process_group", "failed_rank", "abort"]


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


def _create(store, rank, size, timeout):
    return create_process_group(store, rank, size, timeout)


if "GRADWIRE" not in dist.Backend._plugins:
    dist.Backend.register_backend("gradwire", _create)
