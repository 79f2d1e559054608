"""Tributary's elastic trainer side by side with torchft on the same CPU job: steady-state step
time, and after `kill -9` of one replica the time to the survivors' next committed step and to
the replacement's first committed step.

    bench/pytorch/torchft_compare.py                 # 3 replicas, 10 kills per system
    bench/pytorch/torchft_compare.py --kills 2       # a quick look

Needs torchft in .venv (`.venv/bin/pip install torchft==0.2.0`: a benchmark dependency, not
the project's) and the build (build/release/python, build/release/cli/tributary).

The job: a 4 x 256-wide MLP, batch 16 per replica, SGD, one compute thread per process; each
replica is one process (a replica group of 1), so both systems all-reduce the gradients of 3
processes per step.
  torchft    a LighthouseServer (min_replicas 1) and a Manager per replica over its
             ProcessGroupGloo, torchft.DistributedDataParallel, a step committed when
             manager.should_commit() says so; state for a new replica over torchft's HTTP
             checkpoint transport. Defaults as shipped except the timeouts below.
  tributary  a `tributary coordinator` (world 3) and tributary.torch.ElasticTrainer per
             replica; a step is committed when ctx.backward() returned (every bucket committed).
Every replica prints one line per committed step (monotonic time, step); the driver reads them.

Per kill (the victim rotates over the replicas; the systems alternate kill by kill): the
driver SIGKILLs a replica at t0 and starts its replacement at once. Survivors: the first step
that a survivor began after t0 and committed (a step that cannot include the dead replica),
its commit time minus t0. Replacement: its first committed step minus t0 (its process start,
a second or more of importing torch, is in both systems' numbers alike).
Steady state: the median interval between committed steps of one replica, over 40 steps before
the first kill. Medians over the kills, with the range; load average before and after.

Writes bench/results/torchft_compare_<date>.md (or --out).
"""

import argparse
import datetime
import os
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
WIDTH, LAYERS, BATCH = 256, 4, 16


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--replicas", type=int, default=3)
    p.add_argument("--kills", type=int, default=10, help="per system")
    p.add_argument("--settle-s", type=float, default=6.0, help="between a kill and the next")
    p.add_argument("--systems", nargs="+", default=["torchft", "tributary"])
    p.add_argument("--heartbeat-interval-ms", type=int, default=None,
                   help="tributary's coordinator: --heartbeat-interval-ms (a failure is "
                        "confirmed after 3 intervals of silence)")
    p.add_argument("--role", default="driver", help=argparse.SUPPRESS)
    p.add_argument("--replica", default="0", help=argparse.SUPPRESS)
    p.add_argument("--address", default="", help=argparse.SUPPRESS)
    p.add_argument("--out", default=os.path.join(
        REPO, "bench", "results", f"torchft_compare_{datetime.date.today().isoformat()}.md"))
    return p.parse_args()


def model_and_data(seed_step, replica):
    import torch
    g = torch.Generator().manual_seed(seed_step * 1009 + replica)
    return torch.randn(BATCH, WIDTH, generator=g), torch.randint(0, 10, (BATCH,), generator=g)


def make_model():
    import torch
    from torch import nn
    torch.manual_seed(0)
    layers = []
    for _ in range(LAYERS):
        layers += [nn.Linear(WIDTH, WIDTH), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(WIDTH, 10))


def committed(started, step):
    print(f"STEP {started:.6f} {time.monotonic():.6f} {step}", flush=True)


def torchft_replica(args):
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torchft import Manager, Optimizer, ProcessGroupGloo

    torch.set_num_threads(1)
    model = make_model()
    base = torch.optim.SGD(model.parameters(), lr=0.01)
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    manager = Manager(
        pg=ProcessGroupGloo(timeout=timedelta(seconds=10)),
        load_state_dict=lambda s: (model.load_state_dict(s["model"]),
                                   base.load_state_dict(s["optim"])),
        state_dict=lambda: {"model": model.state_dict(), "optim": base.state_dict()},
        min_replica_size=1, replica_id=f"replica_{args.replica}", lighthouse_addr=args.address,
        rank=0, world_size=1, store_addr="127.0.0.1", store_port=store.port,
        timeout=timedelta(seconds=10), quorum_timeout=timedelta(seconds=30),
        connect_timeout=timedelta(seconds=30))
    optimizer = Optimizer(manager, base)
    replica = int(args.replica)
    params = list(model.parameters())
    while True:
        started = time.monotonic()
        optimizer.zero_grad()  # starts the step's quorum
        x, y = model_and_data(manager.current_step(), replica)
        F.cross_entropy(model(x), y).backward()
        # One all-reduce of the flat gradients through the Manager (it averages over the
        # quorum's participants and turns a failure into should_commit() == False).
        # torchft.DistributedDataParallel's comm hook is not used: with torch 2.15 it fails
        # an assertion (ddp.py, `assert fut._fut`) when a peer dies mid-step, and the
        # survivors exit; measured that way torchft would never recover.
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        manager.allreduce(flat).wait()
        offset = 0
        for p in params:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p.grad))
            offset += p.numel()
        if manager.should_commit():
            base.step()
            committed(started, manager.current_step())


def tributary_replica(args):
    import torch
    import torch.nn.functional as F
    from tributary.torch import ElasticTrainer

    torch.set_num_threads(1)
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    trainer = ElasticTrainer(model, optimizer, coordinator=args.address, bucket_cap_mb=25)
    replica = int(args.replica)

    def step(ctx):
        started = time.monotonic()
        x, y = model_and_data(ctx.step, replica)
        ctx.backward(F.cross_entropy(model(x), y))
        optimizer.step()
        committed(started, ctx.step + 1)
        return "continue"

    trainer.run(step)


class Replica:
    def __init__(self, system, index, address, env, log_dir, incarnation):
        self.index = index
        self.log = os.path.join(log_dir, f"{system}-replica{index}-{incarnation}.err")
        with open(self.log, "wb") as err:
            self.process = subprocess.Popen(
                [sys.executable, __file__, "--role", system, "--replica", str(index),
                 "--address", address], env=env, stdout=subprocess.PIPE, stderr=err)
        self.steps = []  # (started, committed, step), monotonic seconds
        self.pending = b""


class System:
    """A lighthouse or coordinator and its replicas; reads their STEP lines."""

    def __init__(self, name, n, coordinator_args=()):
        self.name = name
        self.env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        self.env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.environ.get("PYTHONPATH"),
                        os.path.join(REPO, "build", "release", "python")) if p)
        self.selector = selectors.DefaultSelector()
        self.log_dir = os.path.join("/tmp", f"torchft-compare-{os.getpid()}")
        os.makedirs(self.log_dir, exist_ok=True)
        self.started = 0
        if name == "torchft":
            from torchft._torchft import LighthouseServer
            self.lighthouse = LighthouseServer(bind="[::]:0", min_replicas=1)
            self.address = self.lighthouse.address()
        else:
            sys.path.insert(0, os.path.join(REPO, "build", "release", "python"))
            from tributary.local_coordinator import LocalCoordinator
            self.coordinator = LocalCoordinator(
                n, workdir=self.log_dir, extra_args=coordinator_args,
                binary=os.path.join(REPO, "build", "release", "cli", "tributary"))
            self.env.update(self.coordinator.environment())
            self.address = self.coordinator.endpoint
        self.replicas = [self.start(i) for i in range(n)]
        self.dead = []

    def start(self, index):
        self.started += 1
        r = Replica(self.name, index, self.address, self.env, self.log_dir, self.started)
        self.selector.register(r.process.stdout, selectors.EVENT_READ, r)
        return r

    def pump(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for key, _ in self.selector.select(max(0.0, end - time.monotonic())):
                r = key.data
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    self.selector.unregister(key.fileobj)
                    continue
                r.pending += chunk
                *lines, r.pending = r.pending.split(b"\n")
                for line in lines:
                    if line.startswith(b"STEP "):
                        _, started, done, s = line.split()
                        r.steps.append((float(started), float(done), int(s)))

    def wait_until(self, predicate, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            self.pump(0.05)
            if predicate():
                return True
        return False

    def kill_and_replace(self, index, timeout=60.0):
        victim = self.replicas[index]
        survivors = [r for r in self.replicas if r is not victim]
        t0 = time.monotonic()
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait()
        self.dead.append(victim)
        replacement = self.start(index)
        self.replicas[index] = replacement
        # A survivor's step begun after the kill: one that cannot include the dead replica.
        after = lambda r: [done for started, done, _ in r.steps if started >= t0]
        ok = self.wait_until(lambda: any(after(r) for r in survivors) and replacement.steps,
                             timeout)
        survivor_s = min((after(r)[0] for r in survivors if after(r)), default=None)
        replacement_s = replacement.steps[0][1] if replacement.steps else None
        return (None if survivor_s is None else survivor_s - t0,
                None if replacement_s is None else replacement_s - t0, ok)

    def steady_step_s(self, steps=40, timeout=120.0):
        r = self.replicas[0]
        start = len(r.steps)
        self.wait_until(lambda: len(r.steps) >= start + steps + 1, timeout)
        times = [done for _, done, _ in r.steps[start:start + steps + 1]]
        return statistics.median(b - a for a, b in zip(times, times[1:]))

    def close(self):
        for r in self.replicas + self.dead:
            if r.process.poll() is None:
                r.process.kill()
            r.process.wait()
        if self.name == "torchft":
            self.lighthouse.shutdown()
        else:
            self.coordinator.stop()
        shutil.rmtree(self.log_dir, ignore_errors=True)  # the replicas' logs, for a failed run


def summary(values, digits=3):
    got = [v for v in values if v is not None]
    if not got:
        return "none"
    return (f"{statistics.median(got):.{digits}f} ({min(got):.{digits}f}-{max(got):.{digits}f})"
            + ("" if len(got) == len(values) else f", {len(values) - len(got)} missing"))


def driver(args):
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load_before = os.getloadavg()
    extra = () if args.heartbeat_interval_ms is None else (
        "--heartbeat-interval-ms", str(args.heartbeat_interval_ms))
    systems = {name: System(name, args.replicas, extra) for name in args.systems}
    measured = {name: {"steady": None, "survivors": [], "replacement": []} for name in systems}
    try:
        for name, s in systems.items():
            if not s.wait_until(lambda: all(len(r.steps) >= 20 for r in s.replicas), 180):
                raise RuntimeError(f"{name} did not reach 20 steps on every replica")
        # Steady state measured one system at a time (the other idles: its replicas wait in
        # their step, which costs little CPU but not nothing: both are measured that way).
        for name, s in systems.items():
            measured[name]["steady"] = s.steady_step_s()
        for k in range(args.kills):
            for name, s in systems.items():
                surv, repl, ok = s.kill_and_replace(k % args.replicas)
                measured[name]["survivors"].append(surv)
                measured[name]["replacement"].append(repl)
                print(f"kill {k + 1} {name}: survivors {surv}, replacement {repl}", flush=True)
                s.pump(args.settle_s)
    finally:
        for s in systems.values():
            s.close()
    load_after = os.getloadavg()
    import torch
    import torchft  # noqa: F401
    from importlib.metadata import version
    lines = [
        "# Tributary's elastic trainer vs torchft: steady state and kill -9 recovery",
        "",
        f"Run {started} on this machine (2 cores), `bench/pytorch/torchft_compare.py "
        f"{' '.join(sys.argv[1:])}`; torch {torch.__version__}, torchft {version('torchft')}; "
        f"{args.replicas} replicas of one process each; load average {load_before[0]:.1f} before "
        f"and {load_after[0]:.1f} after (1-minute). "
        + ("Both systems' replicas ran at the same time (the kills alternate between them), so "
           "they shared the machine throughout." if len(systems) > 1 else
           f"Only {', '.join(systems)} ran."),
        "",
        "Seconds, median (range) over the kills; steady state: median interval between one "
        "replica's committed steps over 40 steps. torchft: LighthouseServer(min_replicas=1) "
        "with its default heartbeat and quorum settings, Manager timeout 10 s, "
        "ProcessGroupGloo; tributary: coordinator defaults (heartbeat timeout 1 s)"
        + ("" if args.heartbeat_interval_ms is None else
           f" but --heartbeat-interval-ms {args.heartbeat_interval_ms}") + ".",
        "",
        "| system | steady-state step | kill -9 to survivors' next committed step | kill -9 to "
        "replacement's first committed step | kills |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name in systems:
        m = measured[name]
        lines.append(f"| {name} | {m['steady']:.4f} | {summary(m['survivors'])} | "
                     f"{summary(m['replacement'])} | {len(m['survivors'])} |")
    lines += ["", "Every kill, in order (survivors, replacement; seconds):", ""]
    for name in systems:
        m = measured[name]
        pairs = ", ".join(f"{s if s is None else round(s, 3)}/{r if r is None else round(r, 3)}"
                          for s, r in zip(m["survivors"], m["replacement"]))
        lines.append(f"- {name}: {pairs}")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


def main():
    args = parse_args()
    if args.role == "torchft":
        return torchft_replica(args)
    if args.role == "tributary":
        return tributary_replica(args)
    return driver(args)


if __name__ == "__main__":
    sys.exit(main())
