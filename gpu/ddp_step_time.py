"""DDP step time, tributary vs gloo, on the same job with the model on one GPU shared by every
rank (gpu/device_check.sh runs it there; --device cpu rehearses it anywhere).

Each (backend, world size) is one job of real processes (file:// rendezvous): an MLP of
--width (3 linear layers, ~8.4 M parameters at 2048: 34 MB of float32 gradients per step, in
DDP's default 25 MB buckets), a batch of 64, --warmup steps, then --steps timed steps, each
ended by a device synchronize. A job's step time is the mean over its timed steps, max over
ranks (nccl-tests' rule). Writes a Markdown table (--out) and prints it.

  python3 gpu/ddp_step_time.py --worlds 2 4 --out /tmp/ddp.md
  (PYTHONPATH must reach the tributary package; the tests' cluster.py is not needed)"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def worker(args):
    import torch
    import torch.distributed as dist

    if args.backend == "tributary":
        import tributary.torch  # noqa: F401  (registers the backend)
    device = torch.device(args.device)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, init_method=f"file://{args.init}", rank=args.rank,
                            world_size=args.world)
    torch.manual_seed(0)
    w = args.width
    net = torch.nn.Sequential(torch.nn.Linear(w // 2, w), torch.nn.ReLU(), torch.nn.Linear(w, w),
                              torch.nn.ReLU(), torch.nn.Linear(w, w // 2)).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(64, w // 2, device=device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
        sync()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    dist.barrier()
    dist.destroy_process_group()
    params = sum(p.numel() for p in net.parameters())
    print("RESULT " + json.dumps({"mean_s": sum(times) / len(times), "min_s": min(times),
                                  "params": params}), flush=True)


def run_job(args, backend, world):
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "rendezvous")
        env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        procs = [subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", "--backend", backend,
             "--rank", str(r), "--world", str(world), "--init", init, "--device", args.device,
             "--width", str(args.width), "--warmup", str(args.warmup), "--steps", str(args.steps)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r in range(world)]
        deadline = time.monotonic() + args.timeout
        results, errors = [], []
        for r, p in enumerate(procs):
            try:
                out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                return None, f"timed out after {args.timeout} s"
            lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
            if p.returncode != 0 or not lines:
                errors.append(f"rank {r} exit {p.returncode}: {err.strip()[-400:]}")
            else:
                results.append(json.loads(lines[-1][len("RESULT "):]))
        if errors:
            return None, "; ".join(errors)
        return results, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--backend", default="tributary")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--init", default="")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--worlds", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--backends", nargs="+", default=["gloo", "tributary"])
    ap.add_argument("--timeout", type=float, default=120.0, help="per job, seconds")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    rows = ["| world | backend | step ms (mean, max over ranks) | best step ms | vs gloo |",
            "|---|---|---|---|---|"]
    params = None
    for world in args.worlds:
        gloo_ms = None
        for backend in args.backends:
            results, error = run_job(args, backend, world)
            if error:
                rows.append(f"| {world} | {backend} | failed: {error} | | |")
                continue
            params = results[0]["params"]
            ms = max(r["mean_s"] for r in results) * 1e3
            best = min(r["min_s"] for r in results) * 1e3
            if backend == "gloo":
                gloo_ms = ms
            ratio = f"{ms / gloo_ms:.2f}x" if gloo_ms and backend != "gloo" else ""
            rows.append(f"| {world} | {backend} | {ms:.2f} | {best:.2f} | {ratio} |")
            print(rows[-1], flush=True)
    head = (f"DDP step time on {args.device}, every rank on it: MLP width {args.width} "
            f"({params} parameters), batch 64, {args.warmup} warm-up + {args.steps} timed steps "
            f"per job.\n\n")
    table = head + "\n".join(rows) + "\n"
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)
    return 0 if all("failed" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
