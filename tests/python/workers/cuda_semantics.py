"""What CUDA tensors add to the "tributary" backend beyond dist_sweep.py's values: stream
order (a producer on a side stream, a consumer right after wait() with no host sync), the
CUDA-aware Future, the coalesced and into-tensor collectives, send / recv, the refusal of a
CPU + CUDA mix, and all or nothing (a collective the ranks disagree on leaves the device
tensor as it was). argv: torch_rank world_size init_file. Prints RESULT with one entry per case."""

import sys

import torch
import torch.distributed as dist

import tributary.torch  # noqa: F401  (registers the backend)
from reference import report

DEV = torch.device("cuda:0")


def check(got, want):
    got, want = got.detach().cpu(), torch.as_tensor(want).to(got.dtype)
    if got.shape != want.shape:
        return f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    return "ok" if torch.equal(got, want) else f"got {got.flatten()[:8].tolist()}, " \
                                                f"expected {want.flatten()[:8].tolist()}"


def slow_fill(value, count, stream):
    """A tensor that a long chain of kernels on `stream` fills with `value`: a collective that
    did not wait for the producer's stream would read it half done."""
    with torch.cuda.stream(stream):
        m = torch.rand(1024, 1024, device=DEV)
        for _ in range(20):
            m = torch.tanh(m @ m)  # keeps the GPU busy well past the collective's start
        return (m.sum() * 0 + value).expand(count).contiguous()


def cases(me, n):
    total = sum(range(1, n + 1))  # rank r contributes r + 1

    def producer_on_side_stream():
        s = torch.cuda.Stream()
        x = slow_fill(me + 1, 1 << 20, s)
        with torch.cuda.stream(s):
            dist.all_reduce(x)
            y = x * 1  # the consumer: right after, on the same stream, no host sync
        s.synchronize()
        return check(y, torch.full((1 << 20,), total, dtype=torch.float32))

    def async_wait_orders_the_current_stream():
        x = slow_fill(me + 1, 4096, torch.cuda.current_stream())
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        y = x + 0  # on the current stream, ordered after the copy back by wait()
        return check(y, torch.full((4096,), total, dtype=torch.float32))

    def future_value_and_then():
        x = torch.full((1000,), float(me + 1), device=DEV)
        fut = dist.all_reduce(x, async_op=True).get_future()
        doubled = fut.then(lambda f: f.value()[0] * 2).wait()
        first = check(fut.value()[0], torch.full((1000,), total, dtype=torch.float32))
        return first if first != "ok" else check(
            doubled, torch.full((1000,), 2 * total, dtype=torch.float32))

    def all_reduce_coalesced():
        a = torch.full((3,), float(me + 1), device=DEV)
        b = torch.full((5,), me + 1, dtype=torch.int64, device=DEV)
        c = torch.full((7,), float(me), device=DEV, dtype=torch.float64)
        dist.all_reduce_coalesced([a, b, c])
        for got, want in ((a, [total] * 3), (b, [total] * 5), (c, [total - n] * 7)):
            verdict = check(got, want)
            if verdict != "ok":
                return verdict
        return "ok"

    def all_gather_into_tensor():
        out = torch.zeros(n * 3, device=DEV)
        dist.all_gather_into_tensor(out, torch.full((3,), float(me), device=DEV))
        return check(out, [float(r) for r in range(n) for _ in range(3)])

    def reduce_scatter_tensor():
        out = torch.zeros(2, device=DEV)
        dist.reduce_scatter_tensor(out, torch.arange(2 * n, device=DEV, dtype=torch.float32))
        return check(out, [float(n * (2 * me + k)) for k in range(2)])

    def send_recv():
        if n < 2 or me > 1:
            return "ok"
        x = torch.arange(10, device=DEV, dtype=torch.float32) * (me + 1)
        if me == 0:
            dist.send(x, dst=1)
            got = torch.zeros(10, device=DEV)
            dist.recv(got, src=1)
            return check(got, torch.arange(10, dtype=torch.float32) * 2)
        got = torch.zeros(10, device=DEV)
        dist.recv(got, src=0)
        dist.send(x, dst=0)
        return check(got, torch.arange(10, dtype=torch.float32))

    def mixed_devices_refused():
        out = [torch.zeros(3) for _ in range(n)]  # CPU outputs for a CUDA input
        try:
            dist.all_gather(out, torch.ones(3, device=DEV))
        except RuntimeError as e:
            return "ok" if "mixes CPU and" in str(e) else f"wrong error: {e}"
        return "a CPU + CUDA mix was accepted"

    def mismatch_leaves_the_tensor():
        # Rank 0 all-reduces 8 elements, the others 9: the Work fails on every rank and the
        # device tensor keeps what it held.
        x = torch.full((8 if me == 0 else 9,), float(me + 1), device=DEV)
        try:
            dist.all_reduce(x)
            return "a mismatched all_reduce succeeded"
        except RuntimeError as e:
            if "mismatch" not in str(e).lower():
                return f"wrong error: {e}"
        torch.cuda.synchronize()
        return check(x, torch.full((x.numel(),), float(me + 1)))

    def after_the_mismatch():
        x = torch.full((4,), float(me + 1), device=DEV)
        dist.all_reduce(x)
        return check(x, torch.full((4,), float(total)))

    yield "producer_on_side_stream", producer_on_side_stream
    yield "async_wait_orders_the_current_stream", async_wait_orders_the_current_stream
    yield "future_value_and_then", future_value_and_then
    yield "all_reduce_coalesced", all_reduce_coalesced
    yield "all_gather_into_tensor", all_gather_into_tensor
    yield "reduce_scatter_tensor", reduce_scatter_tensor
    yield "send_recv", send_recv
    yield "mixed_devices_refused", mixed_devices_refused
    yield "mismatch_leaves_the_tensor", mismatch_leaves_the_tensor
    yield "after_the_mismatch", after_the_mismatch


def main():
    me, n, init_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    torch.cuda.set_device(DEV)
    dist.init_process_group("tributary", init_method=f"file://{init_file}", rank=me,
                            world_size=n)
    results = {}
    for name, run in cases(me, n):
        try:
            results[name] = run()
        except RuntimeError as e:
            results[name] = f"RuntimeError: {e}"
    dist.barrier()
    results["barrier"] = "ok"
    dist.destroy_process_group()
    report(results)


if __name__ == "__main__":
    sys.exit(main())
