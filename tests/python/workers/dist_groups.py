"""torch 2's ProcessGroup surface beyond the plain collectives, through the "tributary" backend
with nothing but the environment torchrun sets (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):
the group starts its own coordinator. Any world size >= 2; every case is checked on every rank
against a reference computed from the rank numbers alone.

- subgroups: halves, singletons, overlapping pairs (every rank creates them in one order, as
  torch requires), new_subgroups, split_group; each subgroup's collectives interleaved with
  the default group's, asynchronously, so that cross-talk would show as wrong sums;
- point-to-point: rings with the receive posted before or after the send, several tags in
  flight, batch_isend_irecv, a 4 MiB message, a ring inside a subgroup;
- coalesced collectives, uneven all_to_all_single, all_to_all with blocks of other sizes,
  sparse all_reduce (against the dense sum);
- a Work whose wait times out raises and the operation completes later;
- abort(): a collective that cannot complete (its peer never joins it) fails at once, and so
  does every later call on the aborted group.

Prints RESULT with one entry per case ("ok" or what went wrong)."""

import sys
import time
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

import tributary.torch  # noqa: F401  (registers the backend)
from reference import report


def check(got, want):
    if not torch.equal(got, want):
        return f"got {got.reshape(-1)[:8].tolist()}..., want {want.reshape(-1)[:8].tolist()}..."
    return "ok"


def subgroup_cases(me, n):
    cases = {}
    half = n // 2
    lower, upper = list(range(half)), list(range(half, n))
    g_lower, g_upper = dist.new_group(lower), dist.new_group(upper)
    mine = g_lower if me in lower else g_upper
    members = lower if me in lower else upper
    # Interleaved with the default group, all in flight at once.
    x = torch.full((1001,), float(me + 1))
    y = torch.full((7,), float(me + 1))
    works = [dist.all_reduce(x, group=mine, async_op=True), dist.all_reduce(y, async_op=True)]
    for w in works:
        w.wait()
    cases["halves/all_reduce"] = check(x, torch.full((1001,), float(sum(r + 1 for r in members))))
    cases["halves/interleaved_world"] = check(y, torch.full((7,), float(n * (n + 1) // 2)))
    b = torch.full((5,), float(me))
    dist.broadcast(b, group=mine, group_src=len(members) - 1)
    cases["halves/broadcast"] = check(b, torch.full((5,), float(members[-1])))
    out = [torch.zeros(3) for _ in members]
    dist.all_gather(out, torch.full((3,), float(me)), group=mine)
    cases["halves/all_gather"] = check(torch.stack(out),
                                       torch.tensor([[float(r)] * 3 for r in members]))

    singletons = [dist.new_group([r]) for r in range(n)]
    s = torch.full((4,), float(me) + 0.5)
    dist.all_reduce(s, group=singletons[me])
    cases["singleton/all_reduce"] = check(s, torch.full((4,), float(me) + 0.5))

    # Overlapping pairs {r, r+1}, created in one order everywhere; each member runs its pairs
    # in that order too.
    pairs = [(r, (r + 1) % n) for r in range(n)] if n > 2 else [(0, 1)]
    groups = [dist.new_group(sorted(p)) for p in pairs]
    for p, g in zip(pairs, groups):
        if me in p:
            v = torch.full((9,), float(me * 10 + 1))
            dist.all_reduce(v, group=g)
            cases[f"overlapping/{p}"] = check(v, torch.full((9,), float(sum(r * 10 + 1 for r in p))))

    if n % 2 == 0:
        sub, _ = dist.new_subgroups(group_size=2)
        v = torch.full((3,), float(me))
        dist.all_reduce(v, group=sub)
        base = me - me % 2
        cases["new_subgroups/all_reduce"] = check(v, torch.full((3,), float(2 * base + 1)))

    split = dist.split_group(split_ranks=[lower, upper])
    v = torch.full((6,), 2.0 + me)
    dist.all_reduce(v, group=split, op=dist.ReduceOp.MAX)
    cases["split_group/all_reduce_max"] = check(v, torch.full((6,), 2.0 + members[-1]))
    # A ring inside a subgroup, by group ranks.
    k = len(members)
    if k > 1:
        i = members.index(me)
        got = torch.zeros(3)
        reqs = [dist.irecv(got, group=mine, group_src=(i - 1) % k),
                dist.isend(torch.full((3,), float(me)), group=mine, group_dst=(i + 1) % k)]
        for r in reqs:
            r.wait()
        cases["halves/p2p_ring"] = check(got, torch.full((3,), float(members[(i - 1) % k])))

    pair = dist.new_group([0, 1])
    if me == 0:
        work = dist.all_reduce(torch.ones(4), group=pair, async_op=True)
        time.sleep(0.3)  # it is running, waiting for rank 1, which never joins it
        start = time.monotonic()
        pair.abort()
        try:
            work.wait()
            cases["abort/running_collective_fails"] = "the aborted all_reduce completed"
        except RuntimeError as e:
            took = time.monotonic() - start
            cases["abort/running_collective_fails"] = (
                "ok" if "aborted" in str(e) and took < 5 else f"after {took:.1f} s: {e}")
        try:
            dist.all_reduce(torch.ones(1), group=pair)
            cases["abort/later_calls_fail"] = "an all_reduce ran on the aborted group"
        except RuntimeError as e:
            cases["abort/later_calls_fail"] = "ok" if "aborted" in str(e) else str(e)
    dist.barrier()
    return cases


def p2p_cases(me, n):
    cases = {}
    nxt, prv = (me + 1) % n, (me - 1) % n
    for order in ("recv_first", "send_first"):
        got = torch.zeros(11, dtype=torch.float64)
        send = torch.arange(11, dtype=torch.float64) + 100 * me
        if order == "recv_first":
            reqs = [dist.irecv(got, src=prv), dist.isend(send, dst=nxt)]
        else:
            reqs = [dist.isend(send, dst=nxt), dist.irecv(got, src=prv)]
        for r in reqs:
            r.wait()
        cases[f"ring/{order}"] = check(got, torch.arange(11, dtype=torch.float64) + 100 * prv)
    # Several tags in flight, received in the opposite order from the one they were sent in.
    sends = [dist.isend(torch.full((2,), float(me * 100 + t)), dst=nxt, tag=t) for t in range(4)]
    got = {t: torch.zeros(2) for t in range(4)}
    recvs = [dist.irecv(got[t], src=prv, tag=t) for t in reversed(range(4))]
    for r in sends + recvs:
        r.wait()
    cases["ring/tags_out_of_order"] = "ok" if all(
        torch.equal(got[t], torch.full((2,), float(prv * 100 + t))) for t in range(4)) else \
        f"got {[got[t].tolist() for t in range(4)]}"
    got = torch.zeros(5, dtype=torch.int32)
    ops = [dist.P2POp(dist.irecv, got, prv), dist.P2POp(dist.isend,
                                                        torch.full((5,), me, dtype=torch.int32), nxt)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    cases["ring/batch_isend_irecv"] = check(got, torch.full((5,), prv, dtype=torch.int32))
    big = torch.zeros(1 << 20)  # 4 MiB: more than the sockets buffer
    reqs = [dist.irecv(big, src=prv), dist.isend(torch.full((1 << 20,), float(me)), dst=nxt)]
    for r in reqs:
        r.wait()
    cases["ring/4MiB"] = check(big, torch.full((1 << 20,), float(prv)))
    # A collective issued while a receive is pending does not wait for it.
    late = torch.zeros(2)
    pending = dist.irecv(late, src=prv, tag=77)
    s = torch.ones(3)
    dist.all_reduce(s)
    cases["p2p/collective_while_recv_pending"] = check(s, torch.full((3,), float(n)))
    try:
        pending.wait(timeout=timedelta(milliseconds=200))
        cases["p2p/wait_times_out"] = "the wait returned before anything was sent"
    except RuntimeError as e:
        cases["p2p/wait_times_out"] = "ok" if "not done after 200 ms" in str(e) else str(e)
    dist.barrier()  # every rank's wait has timed out before anyone sends the message
    dist.send(torch.full((2,), float(me)), dst=nxt, tag=77)
    pending.wait()
    cases["p2p/completes_after_timeout"] = check(late, torch.full((2,), float(prv)))
    cases.update(any_source_cases(me, n))
    return cases


def any_source_cases(me, n):
    """Receives from any rank (dist.recv / irecv without src, torch's recvAnysource): rank 0
    takes one message from every other rank in whatever order they come, each call returning
    its sender; one posted before anything was sent, its sender read from the Work; one whose
    tag is not the first to arrive (the earlier message, of another tag, is left for the
    receive that names its sender)."""
    cases = {}
    if me == 0:
        got = []
        for _ in range(n - 1):
            t = torch.zeros(4)
            src = dist.recv(t, tag=90)
            got.append((src, t))
        wrong = [(src, t.tolist()) for src, t in got if not torch.equal(t, torch.full((4,), float(src)))]
        senders = sorted(src for src, _ in got)
        cases["p2p/recv_any_source"] = "ok" if senders == list(range(1, n)) and not wrong else \
            f"senders {senders}, wrong {wrong}"
        t = torch.zeros(3, dtype=torch.int64)
        work = dist.irecv(t, tag=91)
        dist.barrier()  # posted before anyone sends
        work.wait()
        src = work._source_rank()
        cases["p2p/irecv_any_source_posted_first"] = "ok" if src == n - 1 and torch.equal(
            t, torch.full((3,), 7 * src, dtype=torch.int64)) else f"from {src}: {t.tolist()}"
        dist.barrier()  # rank 1's tag 92 has arrived (it sent it before this barrier)
        second = torch.zeros(2)
        src = dist.recv(second, tag=93)
        first = torch.zeros(2)
        dist.recv(first, src=1, tag=92)
        cases["p2p/recv_any_source_by_tag"] = "ok" if src == n - 1 and torch.equal(
            second, torch.full((2,), 93.0)) and torch.equal(first, torch.full((2,), 92.0)) else \
            f"from {src}: {second.tolist()}, then {first.tolist()}"
    else:
        dist.send(torch.full((4,), float(me)), dst=0, tag=90)
        dist.barrier()
        if me == n - 1:
            dist.send(torch.full((3,), 7 * me, dtype=torch.int64), dst=0, tag=91)
        if me == 1:
            dist.send(torch.full((2,), 92.0), dst=0, tag=92)
        dist.barrier()
        if me == n - 1:
            dist.send(torch.full((2,), 93.0), dst=0, tag=93)
    return cases


def coalesced_cases(me, n):
    cases = {}
    a = torch.full((5,), float(me + 1))
    b = torch.full((2, 3), float(me + 1))
    c = torch.full((7,), float(me + 1))
    dist.all_reduce_coalesced([a, b, c])
    total = n * (n + 1) // 2
    cases["all_reduce_coalesced"] = "ok" if (
        torch.equal(a, torch.full((5,), float(total))) and
        torch.equal(b, torch.full((2, 3), float(total))) and
        torch.equal(c, torch.full((7,), float(total)))) else \
        f"got {a.tolist()} {b.tolist()} {c.tolist()}"
    outs = [[torch.zeros(2) for _ in range(n)], [torch.zeros(3, 2) for _ in range(n)]]
    dist.all_gather_coalesced(outs, [torch.full((2,), float(me)), torch.full((3, 2), me + 0.5)])
    cases["all_gather_coalesced"] = "ok" if all(
        torch.equal(outs[0][r], torch.full((2,), float(r))) and
        torch.equal(outs[1][r], torch.full((3, 2), r + 0.5)) for r in range(n)) else \
        f"got {outs}"
    g1, g2 = torch.zeros(2 * n), torch.zeros(3 * n, dtype=torch.float64)
    r1, r2 = torch.zeros(2), torch.zeros(3, dtype=torch.float64)
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.all_gather_into_tensor(g1, torch.full((2,), float(me)))
        dist.all_gather_into_tensor(g2, torch.full((3,), float(me), dtype=torch.float64))
    cm.wait()
    cases["all_gather_into_tensor_coalesced"] = "ok" if (
        torch.equal(g1, torch.arange(n).repeat_interleave(2).float()) and
        torch.equal(g2, torch.arange(n).repeat_interleave(3).double())) else f"got {g1} {g2}"
    with dist._coalescing_manager(async_ops=True) as cm:
        dist.reduce_scatter_tensor(r1, torch.arange(2 * n, dtype=torch.float32))
        dist.reduce_scatter_tensor(r2, torch.arange(3 * n, dtype=torch.float64))
    cm.wait()
    cases["reduce_scatter_tensor_coalesced"] = "ok" if (
        torch.equal(r1, n * torch.arange(2 * me, 2 * me + 2, dtype=torch.float32)) and
        torch.equal(r2, n * torch.arange(3 * me, 3 * me + 3, dtype=torch.float64))) else \
        f"got {r1} {r2}"
    return cases


def all_to_all_cases(me, n):
    cases = {}
    # Rank i sends (i + 2 * j) % 4 rows of 3 to rank j; row values name (sender, receiver, k).
    rows = lambda i, j: (i + 2 * j) % 4
    send = torch.cat([torch.tensor([[i * 100 + j * 10 + k] * 3 for k in range(rows(me, j))],
                                   dtype=torch.float32).reshape(-1, 3)
                      for i, j in [(me, j) for j in range(n)]])
    out = torch.full((sum(rows(i, me) for i in range(n)), 3), -1.0)
    dist.all_to_all_single(out, send, output_split_sizes=[rows(i, me) for i in range(n)],
                           input_split_sizes=[rows(me, j) for j in range(n)])
    want = torch.cat([torch.tensor([[i * 100 + me * 10 + k] * 3 for k in range(rows(i, me))],
                                   dtype=torch.float32).reshape(-1, 3) for i in range(n)])
    cases["all_to_all_single/uneven"] = check(out, want)
    ins = [torch.full((j + 1,), me * 10 + j, dtype=torch.int64) for j in range(n)]
    outs = [torch.zeros(me + 1, dtype=torch.int64) for _ in range(n)]
    dist.all_to_all(outs, ins)
    cases["all_to_all/blocks_of_other_sizes"] = "ok" if all(
        torch.equal(outs[i], torch.full((me + 1,), i * 10 + me, dtype=torch.int64))
        for i in range(n)) else f"got {outs}"
    return cases


def sparse_cases(me, n):
    cases = {}
    # Overlapping and disjoint indices; rank 0 contributes nothing at all.
    idx = torch.tensor([[i % 6 for i in range(me, me + 2 * me)]], dtype=torch.int64)
    val = torch.arange(2 * me * 2, dtype=torch.float32).reshape(2 * me, 2) + me
    t = torch.sparse_coo_tensor(idx, val, (6, 2))
    dense = torch.zeros(6, 2)
    for r in range(n):
        ri = torch.tensor([[i % 6 for i in range(r, r + 2 * r)]], dtype=torch.int64)
        rv = torch.arange(2 * r * 2, dtype=torch.float32).reshape(2 * r, 2) + r
        dense += torch.sparse_coo_tensor(ri, rv, (6, 2)).to_dense()
    dist.all_reduce(t)
    cases["sparse/all_reduce_sum"] = check(t.to_dense(), dense)
    return cases


def bool_cases(me, n):
    """Bool tensors, as torch computes them on one rank: SUM and MAX are "any", PRODUCT and
    MIN "all"; in a coalesced all-reduce; and reduce_scatter. Then BAND, BOR and BXOR of integer
    and bool tensors."""
    cases = {}
    mine = torch.tensor([me == 0, True, False, me % 2 == 1])  # rank 0 alone, all, none, odd
    stacked = torch.stack([torch.tensor([r == 0, True, False, r % 2 == 1]) for r in range(n)])
    anyone, everyone = stacked.any(0), stacked.all(0)
    for name, op, want in (("sum", dist.ReduceOp.SUM, anyone), ("max", dist.ReduceOp.MAX, anyone),
                           ("product", dist.ReduceOp.PRODUCT, everyone),
                           ("min", dist.ReduceOp.MIN, everyone)):
        t = mine.clone()
        dist.all_reduce(t, op=op)
        cases[f"bool/all_reduce_{name}"] = check(t, want)
    flags, more = mine.clone(), mine.clone().flip(0)
    dist.all_reduce_coalesced([flags, more], op=dist.ReduceOp.MIN)
    cases["bool/all_reduce_coalesced"] = "ok" if torch.equal(flags, everyone) and torch.equal(
        more, everyone.flip(0)) else f"got {flags.tolist()} {more.tolist()}"
    out = torch.zeros(4, dtype=torch.bool)
    dist.reduce_scatter_tensor(out, mine.repeat(n))
    cases["bool/reduce_scatter_tensor"] = check(out, anyone)
    # Bitwise operations (integers and bools): every rank's own bit, and a mask.
    bits = torch.tensor([1 << me, 0xFF ^ (1 << me), me], dtype=torch.int64)
    for name, op, fold in (("band", dist.ReduceOp.BAND, lambda a, b: a & b),
                           ("bor", dist.ReduceOp.BOR, lambda a, b: a | b),
                           ("bxor", dist.ReduceOp.BXOR, lambda a, b: a ^ b)):
        want = torch.tensor([1, 0xFF ^ 1, 0], dtype=torch.int64)
        for r in range(1, n):
            want = fold(want, torch.tensor([1 << r, 0xFF ^ (1 << r), r], dtype=torch.int64))
        t = bits.clone()
        dist.all_reduce(t, op=op)
        cases[f"bitwise/all_reduce_{name}"] = check(t, want)
    t = mine.clone()
    dist.all_reduce(t, op=dist.ReduceOp.BXOR)
    cases["bitwise/all_reduce_bxor_bool"] = check(t, stacked.sum(0) % 2 == 1)
    return cases


def main():
    dist.init_process_group("tributary")
    me, n = dist.get_rank(), dist.get_world_size()
    cases = {}
    for part in (subgroup_cases, p2p_cases, coalesced_cases, all_to_all_cases, sparse_cases,
                 bool_cases):
        try:
            cases.update(part(me, n))
        except Exception:  # the test names the part that broke and shows why
            cases[part.__name__] = traceback.format_exc()
    dist.barrier()
    dist.destroy_process_group()
    report(cases)


if __name__ == "__main__":
    sys.exit(main())
