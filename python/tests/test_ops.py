"""Every op of the gradwire backend against a reference computed independently (float64 /
int64 from every rank's inputs, which each rank can regenerate) on 2, 3 and 4 ranks."""
import pytest
import torch
import torch.distributed as dist

from gw_testutil import init, spawn

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.int32,
          torch.int64, torch.uint8]
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}
# (rtol, atol): partial results are rounded to the dtype at every step (values up to ~16).
TOL = {torch.float32: (1e-5, 1e-5), torch.float64: (1e-12, 1e-12), torch.float16: (5e-3, 2e-2),
       torch.bfloat16: (3e-2, 0.15)}


def data(rank, count, dtype, salt=0):
    """Rank `rank`'s input: small values, so products of 4 ranks fit every integer type."""
    g = torch.Generator().manual_seed(1000 * rank + 7 * count + salt)
    if dtype.is_floating_point:
        return (torch.rand(count, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)
    lo = 0 if dtype == torch.uint8 else -3
    return torch.randint(lo, 4, (count,), generator=g, dtype=torch.int64).to(dtype)


def reference(n, count, dtype, op, salt=0):
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    xs = torch.stack([data(r, count, dtype, salt).to(wide) for r in range(n)])
    if op == "sum":
        out = xs.sum(0)
    elif op == "product":
        out = xs.prod(0)
    elif op == "min":
        out = xs.min(0).values
    elif op == "max":
        out = xs.max(0).values
    else:  # avg: integers truncate toward zero, like C
        out = xs.sum(0) / n if dtype.is_floating_point else torch.div(xs.sum(0), n,
                                                                      rounding_mode="trunc")
    return out.to(dtype)  # integer sums wrap modulo 2^bits, as in the library


def check(got, want, n, op, what):
    exact = not got.dtype.is_floating_point or op in ("min", "max") or (
        n == 2 and op in ("sum", "product"))
    if exact:
        assert torch.equal(got, want), f"{what}: {got} != {want}"
    else:
        rtol, atol = TOL[got.dtype]
        torch.testing.assert_close(got.double(), want.double(), rtol=rtol, atol=atol, msg=what)


def noncontig(t):
    """A strided view holding t's values (every other element of a bigger buffer)."""
    buf = torch.zeros(t.numel() * 2, dtype=t.dtype)
    v = buf[::2]
    v.copy_(t)
    return v


def run_ops(rank, n, tmpdir):
    init("gradwire", rank, n, tmpdir, "ops")
    me = rank
    # allreduce: every dtype x op, contiguous and strided; one ring-sized float32 sum.
    for dt in DTYPES:
        for name, op in OPS.items():
            if name == "avg" and dt == torch.int8:
                with pytest.raises(NotImplementedError, match="gradwire allreduce"):
                    dist.all_reduce(data(me, 5, dt), op=op)
                continue
            for strided in (False, True):
                t = data(me, 37, dt)
                if strided:
                    t = noncontig(t)
                dist.all_reduce(t, op=op)
                check(t, reference(n, 37, dt, name), n, name, f"allreduce {dt} {name} {strided}")
    big = data(me, 70001, torch.float32)
    dist.all_reduce(big)
    check(big, reference(n, 70001, torch.float32, "sum"), n, "sum", "allreduce ring")
    # Async: several in flight, futures carry the tensors.
    ts = [data(me, 100 + i, torch.int64) for i in range(20)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for i, w in enumerate(works):
        got = w.get_future().wait()[0]
        assert w.is_completed() and got is not None
        check(ts[i], reference(n, 100 + i, torch.int64, "sum"), n, "sum", "async allreduce")
    # allreduce_coalesced
    a, b = data(me, 10, torch.float64), noncontig(data(me, 33, torch.float64, 1))
    dist.all_reduce_coalesced([a, b], op=dist.ReduceOp.MAX)
    check(a, reference(n, 10, torch.float64, "max"), n, "max", "coalesced a")
    check(b, reference(n, 33, torch.float64, "max", 1), n, "max", "coalesced b")
    # broadcast / reduce from every root
    for root in range(n):
        t = noncontig(data(me, 50, torch.int32)) if root % 2 else data(me, 50, torch.int32)
        dist.broadcast(t, src=root)
        assert torch.equal(t, data(root, 50, torch.int32)), "broadcast"
        t = data(me, 41, torch.float32)
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        if me == root:
            check(t, reference(n, 41, torch.float32, "sum"), n, "sum", "reduce")
        else:
            assert torch.equal(t, data(me, 41, torch.float32)), "reduce changed a non-root input"
    # allgather (list and base)
    outs = [torch.empty(13, dtype=torch.bfloat16) for _ in range(n)]
    outs[0] = noncontig(outs[0])
    dist.all_gather(outs, data(me, 13, torch.bfloat16))
    for r in range(n):
        assert torch.equal(outs[r], data(r, 13, torch.bfloat16)), "all_gather"
    flat = torch.empty(n * 9, dtype=torch.int64)
    dist._all_gather_base(flat, data(me, 9, torch.int64))
    assert torch.equal(flat, torch.cat([data(r, 9, torch.int64) for r in range(n)])), "ag base"
    # gather / scatter, every root
    for root in range(n):
        outs = [torch.empty(7, dtype=torch.float16) for _ in range(n)] if me == root else None
        dist.gather(data(me, 7, torch.float16), gather_list=outs, dst=root)
        if me == root:
            for r in range(n):
                assert torch.equal(outs[r], data(r, 7, torch.float16)), "gather"
        t = noncontig(torch.empty(11, dtype=torch.uint8))
        ins = [data(r, 11, torch.uint8, root) for r in range(n)] if me == root else None
        dist.scatter(t, scatter_list=ins, src=root)
        assert torch.equal(t, data(me, 11, torch.uint8, root)), "scatter"
    # reduce_scatter (list and base)
    ins = [data(me, 6, torch.int8, j) for j in range(n)]
    out = torch.empty(6, dtype=torch.int8)
    dist.reduce_scatter(out, ins, op=dist.ReduceOp.MIN)
    check(out, reference(n, 6, torch.int8, "min", me), n, "min", "reduce_scatter")
    out = torch.empty(5, dtype=torch.float64)
    full = torch.cat([data(me, 5, torch.float64, j) for j in range(n)])
    dist._reduce_scatter_base(out, full)
    check(out, reference(n, 5, torch.float64, "sum", me), n, "sum", "reduce_scatter base")
    # alltoall: equal and uneven splits (rank i sends i+j+1 rows of 3 to rank j)
    src = torch.arange(n * 4, dtype=torch.int64) + 100 * me
    dst = torch.empty(n * 4, dtype=torch.int64)
    dist.all_to_all_single(dst, src)
    want = torch.cat([torch.arange(me * 4, me * 4 + 4) + 100 * r for r in range(n)])
    assert torch.equal(dst, want), "all_to_all_single"
    in_splits = [me + j + 1 for j in range(n)]
    out_splits = [i + me + 1 for i in range(n)]
    src = torch.full((sum(in_splits), 3), float(me))
    dst = torch.empty(sum(out_splits), 3)
    dist.all_to_all_single(dst, src, out_splits, in_splits)
    want = torch.cat([torch.full((i + me + 1, 3), float(i)) for i in range(n)])
    assert torch.equal(dst, want), "all_to_all_single uneven"
    # all_to_all of tensor lists: rank i sends j an (i + j + 1)-element tensor; one strided out
    ins = [torch.full((me + j + 1,), me * 100 + j, dtype=torch.int32) for j in range(n)]
    outs = [torch.empty(i + me + 1, dtype=torch.int32) for i in range(n)]
    outs[-1] = noncontig(outs[-1])
    dist.all_to_all(outs, ins)
    for i in range(n):
        assert torch.equal(outs[i], torch.full((i + me + 1,), i * 100 + me,
                                               dtype=torch.int32)), f"all_to_all from {i}"
    # all_gather_coalesced: shapes differ, one tensor empty (torch requires one dtype)
    def parts(r):
        return [data(r, 6, torch.float64).view(2, 3), data(r, 0, torch.float64),
                data(r, 3, torch.float64, 2)]
    ins = parts(me)
    outs = [[torch.empty_like(t) for t in ins] for _ in range(n)]
    dist.all_gather_coalesced(outs, ins)
    for r in range(n):
        want = parts(r)
        assert all(torch.equal(a, b) for a, b in zip(outs[r], want)), "all_gather_coalesced"
    # sparse COO allreduce: a different number of entries on each rank (some shared)
    def sparse(r):
        idx = torch.tensor([[i % 4 for i in range(r + 2)], [(i * r) % 3 for i in range(r + 2)]])
        return torch.sparse_coo_tensor(idx, data(r, r + 2, torch.float64), (4, 3, ))
    t = sparse(me)
    dist.all_reduce(t)
    want = sum(sparse(r).to_dense() for r in range(n))
    assert t.is_sparse and torch.allclose(t.to_dense(), want, rtol=0, atol=1e-12), "sparse"
    # point to point: a ring with tags, then any-source into rank 0
    nxt, prv = (me + 1) % n, (me - 1) % n
    t = torch.empty(1000, dtype=torch.float32)
    s = dist.isend(data(me, 1000, torch.float32), nxt, tag=3)
    dist.recv(t, src=prv, tag=3)
    s.wait()
    assert torch.equal(t, data(prv, 1000, torch.float32)), "send/recv"
    if me == 0:
        seen = set()
        for _ in range(n - 1):
            t = torch.empty(1, dtype=torch.int64)
            src_rank = dist.recv(t, tag=5)
            assert t.item() == src_rank * 10, "recv any source"
            seen.add(src_rank)
        assert seen == set(range(1, n))
    else:
        dist.send(torch.tensor([me * 10]), 0, tag=5)
    # a size that differs across ranks: the receiving rank names the sender and both sizes
    outs = [torch.empty(2 if (i, me) == (1, 0) else 1) for i in range(n)]
    if me == 0:
        with pytest.raises(RuntimeError, match="rank 1 sent 4 bytes, this rank's tensor holds 8"):
            dist.all_to_all(outs, [torch.ones(1) for _ in range(n)])
    else:
        dist.all_to_all(outs, [torch.ones(1) for _ in range(n)])
    # unsupported: named clearly
    with pytest.raises(NotImplementedError, match="gradwire allreduce: dtype"):
        dist.all_reduce(torch.ones(3, dtype=torch.int16))
    with pytest.raises(NotImplementedError, match="BAND"):
        dist.all_reduce(torch.ones(3, dtype=torch.int32), op=dist.ReduceOp.BAND)
    dist.barrier()
    dist.destroy_process_group()


@pytest.mark.parametrize("n", [2, 3, 4])
def test_every_op(n):
    spawn(run_ops, n)
