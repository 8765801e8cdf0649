"""The habits of a healthy training run, measured with torch (`--measure full`): the GPU's
telemetry while it trains, host-to-device bandwidth from pageable and from pinned memory,
DataLoader samples/s with 0 and N workers against the rate a training step consumes, and
memory peaks (fp32, bf16 autocast, gradient accumulation, activation checkpointing) with a
provoked out-of-memory caught and reported. What applies on the CPU runs there; the GPU-only
parts are skipped with the reason. Imports the standard library, the harness and torch."""
# ruff: noqa: BLE001  (a failing measurement is reported, never a crash)
import contextlib
import os
import time

if __package__:
    from envgen.smoke import _harness as h
else:
    import _harness as h

import torch
import torch.nn.functional as F

SUSTAIN_S = 6.0            # training under telemetry, on a GPU
H2D_MIB, H2D_ITERS = 256, 5
LOADER_BATCH, LOADER_BATCHES = 64, 24
MEM_WIDTH, MEM_DEPTH, MEM_BATCH, ACCUM = 2048, 8, 2048, 4


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _bf16(device):
    if device.type != "cuda":
        return torch.bfloat16
    try:
        ok = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch < 2.3
        ok = torch.cuda.is_bf16_supported()
    return torch.bfloat16 if ok else torch.float16


# ---------------------------------------------------------------------------------- telemetry
def mlp(width, depth):
    nn = torch.nn
    layers = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    return nn.Sequential(*layers, nn.Linear(width, 10))


def sustained_training(device, seconds, width=4096, batch=1024):
    """bf16 autocast training of an MLP for about `seconds`; samples/s and steps."""
    torch.manual_seed(0)
    model = mlp(width, 4).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device.type, dtype=_bf16(device)):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        _sync(device)
        steps += 10
    return batch * steps / (time.perf_counter() - t0), steps


def check_telemetry(rep, device):
    """nvidia-smi sampled while the GPU trains: utilization, memory, power, temperature, SM
    clock (min/median/max), and the clock event reasons; a warning when it was throttled
    or idle most of the time."""
    tele = h.Telemetry(interval=0.25).start()
    try:
        sps, steps = sustained_training(device, SUSTAIN_S)
    finally:
        t = tele.stop()
    rep["habits"]["telemetry"] = t
    if t["error"] or not t["samples"]:
        return h.check(rep, "telemetry", False, f"no telemetry: {t['error'] or 'no sample'}")
    def mmm(key, unit):
        v = t.get(key)
        return f"{key} {v['min']:g}/{v['median']:g}/{v['max']:g}{unit}" if v else f"{key} n/a"
    detail = (f"{t['samples']} samples over {steps} steps ({sps:,.0f} samples/s), min/median/max: "
              + ", ".join(mmm(k, u) for k, u in (("utilization_gpu_pct", " %"),
                                                ("sm_clock_mhz", " MHz"),
                                                ("power_draw_w", " W"),
                                                ("temperature_c", " C"),
                                                ("memory_used_mib", " MiB")))
              + f"; throttled {t.get('throttled_fraction')}")
    extra = {"warning": True, "fix": "; ".join(t["warnings"])} if t["warnings"] else {}
    if extra:
        detail += f"; {extra['fix']}"
    h.check(rep, "telemetry", True, detail, **extra)


# ---------------------------------------------------------------------------------- bandwidth
def copy_gbps(src, device, iters):
    dst = torch.empty(src.shape, dtype=src.dtype, device=device)
    dst.copy_(src, non_blocking=src.is_pinned())   # warm-up
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        dst.copy_(src, non_blocking=src.is_pinned())
    end.record()
    end.synchronize()
    return src.numel() * src.element_size() * iters / (start.elapsed_time(end) / 1000) / 1e9


def check_h2d(rep, device):
    n = H2D_MIB * 2**20
    pageable = torch.empty(n, dtype=torch.uint8).fill_(1)
    pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True).fill_(1)
    page_gbps, pin_gbps = (copy_gbps(t, device, H2D_ITERS) for t in (pageable, pinned))
    rep["habits"]["h2d"] = {"mib": H2D_MIB, "pageable_gbps": round(page_gbps, 2),
                            "pinned_gbps": round(pin_gbps, 2)}
    detail = (f"{H2D_MIB} MiB host to device: pageable {page_gbps:.1f} GB/s, pinned "
              f"{pin_gbps:.1f} GB/s ({pin_gbps / max(page_gbps, 1e-9):.1f}x)")
    extra = {}
    if pin_gbps < 1.2 * page_gbps:
        extra = {"warning": True, "fix": "pinned memory is not faster than pageable here: "
                 "check the GPU's PCIe link (nvidia-smi -q -d PCI) and --ulimit memlock=-1"}
        detail += f"; {extra['fix']}"
    h.check(rep, "h2d_bandwidth", pin_gbps > 0 and page_gbps > 0, detail, **extra)


# ---------------------------------------------------------------------------------- loader
class Decoded(torch.utils.data.Dataset):
    """Samples that cost CPU to make, like decoded and augmented images: a 3x64x64 image
    drawn, blurred and pooled down to the 3x16x16 the smoke model takes."""
    def __len__(self):
        return LOADER_BATCH * LOADER_BATCHES

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, 64, 64, generator=g)
        img = F.avg_pool2d(F.avg_pool2d(img[None], 3, 1, 1), 4)[0]
        return (img - 0.5) / 0.25, i % 4


def loader_rate(workers, pin, device):
    loader = torch.utils.data.DataLoader(Decoded(), batch_size=LOADER_BATCH,
                                         num_workers=workers, pin_memory=pin,
                                         **({"prefetch_factor": 4, "timeout": 120}
                                            if workers else {}))
    it, n, t0 = iter(loader), 0, None
    for i, (x, _) in enumerate(it):
        x = x.to(device, non_blocking=pin)
        if i == 0:   # the workers' start-up is not their rate
            t0 = time.perf_counter()
            continue
        n += x.shape[0]
    _sync(device)
    return n / max(time.perf_counter() - t0, 1e-9)


def check_loader_rates(rep, device, step_rate):
    """Samples/s from 0 and N worker processes against what training consumes."""
    workers = max(2, min(4, os.cpu_count() or 1))
    pin = device.type == "cuda"
    try:
        rates = {w: loader_rate(w, pin, device) for w in (0, workers)}
    except Exception as exc:
        text = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        if not h.shm_trouble(text):
            raise
        return h.check(rep, "loader_rates", False, f"{h.shm_fix(h.shm_mib())} ({text})",
                       fix=h.shm_fix(h.shm_mib()))
    rep["habits"]["loader"] = {"samples_per_s": {str(w): round(r, 1) for w, r in rates.items()},
                               "step_samples_per_s": round(step_rate, 1),
                               "pin_memory": pin, "cpus": os.cpu_count()}
    detail, fix = h.loader_finding(rates, step_rate)
    extra = {"warning": True, "fix": fix} if fix else {}
    h.check(rep, "loader_rates", True, detail + (f"; {fix}" if fix else ""), **extra)


# ---------------------------------------------------------------------------------- memory
class Blocks(torch.nn.Module):
    def __init__(self, width, depth, checkpointed=False):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU())
            for _ in range(depth))
        self.head, self.checkpointed = torch.nn.Linear(width, 10), checkpointed

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpointed else block(x)
        return self.head(x)


def peak_of(device, model, batch, width, micro=1, dtype=None):
    """Peak allocated and reserved MiB of one optimizer step: `micro` micro-batches of
    batch/micro (gradient accumulation), under autocast `dtype` when given."""
    x = torch.randn(batch, width, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    for xs, ys in zip(x.chunk(micro), y.chunk(micro)):  # noqa: B905 (Python 3.8 payloads)
        with torch.autocast("cuda", dtype=dtype) if dtype else contextlib.nullcontext():
            loss = F.cross_entropy(model(xs), ys) / micro
        loss.backward()
    model.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    return (round(torch.cuda.max_memory_allocated(device) / 2**20, 1),
            round(torch.cuda.max_memory_reserved(device) / 2**20, 1))


def provoke_oom(device):
    """Ask for more than the GPU has: the OutOfMemoryError is caught, the memory comes back."""
    free, total = torch.cuda.mem_get_info(device)
    ask = int(total * 1.25)
    oom_type = getattr(torch.cuda, "OutOfMemoryError", RuntimeError)
    try:
        block = torch.empty(ask, dtype=torch.uint8, device=device)
        del block
        return {"caught": False, "asked_gib": round(ask / 2**30, 1)}
    except oom_type as exc:
        kind = type(exc).__name__
    torch.cuda.empty_cache()
    after = torch.ones(2**20, device=device).sum().item() == 2**20   # usable again
    return {"caught": True, "error": kind, "asked_gib": round(ask / 2**30, 1),
            "free_gib": round(free / 2**30, 1), "usable_after": after,
            "reserved_after_mib": round(torch.cuda.memory_reserved(device) / 2**20, 1)}


def check_memory_peaks(rep, device):
    torch.manual_seed(0)
    w, d, b = MEM_WIDTH, MEM_DEPTH, MEM_BATCH
    plain, ckpt = Blocks(w, d).to(device), Blocks(w, d, checkpointed=True).to(device)
    peaks = {"fp32": peak_of(device, plain, b, w),
             "bf16_autocast": peak_of(device, plain, b, w, dtype=_bf16(device)),
             f"grad_accum_{ACCUM}": peak_of(device, plain, b, w, micro=ACCUM),
             "checkpoint": peak_of(device, ckpt, b, w)}
    del plain, ckpt
    oom = provoke_oom(device)
    rep["habits"]["memory"] = {"model": f"{d} x Linear({w}, {w}), batch {b}",
                               "peak_mib": {k: {"allocated": a, "reserved": r}
                                            for k, (a, r) in peaks.items()},
                               "oom": oom}
    base = peaks["fp32"][0]
    parts = ", ".join(f"{k} {a:,.0f}/{r:,.0f}" for k, (a, r) in peaks.items())
    saved = ", ".join(f"{k} {100 * (1 - a / base):.0f} %" for k, (a, _) in peaks.items()
                      if k != "fp32")
    h.check(rep, "memory_peaks", all(a > 0 for a, _ in peaks.values()),
            f"peak allocated/reserved MiB: {parts} (saved against fp32: {saved})")
    ok = oom["caught"] and oom.get("usable_after")
    h.check(rep, "oom_recovery", ok,
            f"asked for {oom['asked_gib']} GiB with {oom.get('free_gib')} GiB free: "
            + (f"{oom['error']} caught, the GPU usable again ({oom['reserved_after_mib']} MiB "
               f"reserved after empty_cache)" if ok else "NOT caught or not recovered"),
            finding=h.OOM_ADVICE if ok else None)


# ---------------------------------------------------------------------------------- all of them
def run_habits(rep, device, step_rate, gpu_check, guarded):
    """Every habit measurement; `gpu_check`/`guarded` are the payload's own wrappers."""
    rep.setdefault("habits", {})
    gpu_check(rep, "telemetry", check_telemetry, device)
    gpu_check(rep, "h2d_bandwidth", check_h2d, device)
    guarded(rep, "loader_rates", check_loader_rates, device, step_rate)
    gpu_check(rep, "memory_peaks", check_memory_peaks, device)
