#!/usr/bin/env python3
"""envgen smoke-training payload for PyTorch images.

Copied into images and run as ``python /opt/envgen/torch_smoke.py [options]``; importable as
``envgen.smoke.torch_smoke`` too (``main(argv) -> int``, ``run(options) -> dict``). Imports the
standard library and torch only. Prints exactly one JSON report on stdout (logs go to stderr);
exits 0 when every check passed, 1 when any failed, 2 on bad arguments.
"""
# ruff: noqa: BLE001  (catching everything is the point: a failing check is reported, never a crash)
import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import queue
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

_T_START = time.monotonic()  # a script's --timeout counts from here, before the slow torch import
# Before anything NCCL: NVLink SHARP / multicast stays off (it hangs in many containers).
for _key in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ.setdefault(_key, "0" if _key == "NCCL_NVLS_ENABLE" else "1")

try:
    import torch
    import torch.nn.functional as F
    _TORCH_ERROR = None
except Exception as _exc:  # a broken torch is reported, not a crash
    torch = F = None
    _TORCH_ERROR = f"{type(_exc).__name__}: {_exc}"

PAYLOAD_VERSION = 1
LOSS_RATIO_MAX = 0.7  # mean of the last few losses < 0.7 x mean of the first few
EXPECT_KEYS = ("framework", "cuda", "cudnn", "nccl")
OOM_ADVICE = ("out of memory: lower --batch, use mixed precision, or free the GPU "
              "(nvidia-smi lists other processes)")
_CHILDREN = []  # multi-GPU processes, killed if the overall --timeout fires


def log(msg):
    print(f"[torch_smoke {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------- arguments
class BadArguments(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadArguments(message)


def _expect_arg(text):
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    if set(value) - set(EXPECT_KEYS):
        raise argparse.ArgumentTypeError(f"unknown key(s) {sorted(set(value) - set(EXPECT_KEYS))}")
    if any(v is not None and not isinstance(v, str) for v in value.values()):
        raise argparse.ArgumentTypeError('versions are strings or null (quote them: "12.1")')
    return value


def _number(cast, low):
    def parse(text):
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value >= low:
            raise argparse.ArgumentTypeError(f"must be >= {low}")
        return value
    return parse


def build_parser():
    p = _Parser(prog="torch_smoke.py", description="Certify a PyTorch image by training in it.")
    p.add_argument("--expect", type=_expect_arg, default={},
                   help='JSON object with "framework", "cuda", "cudnn", "nccl" (each optional)')
    p.add_argument("--require", choices=("cuda", "cpu", "auto"), default="auto",
                   help="cuda: a GPU was requested, training on the CPU fails; auto: cuda if any")
    p.add_argument("--steps", type=_number(int, 6), default=None,
                   help="training steps (default 30, 12 with --quick)")
    p.add_argument("--batch", type=_number(int, 1), default=64)
    p.add_argument("--multi-gpu", action="store_true",
                   help="NCCL all-reduce and DDP when more than one GPU is visible")
    p.add_argument("--timeout", type=_number(float, 1.0), default=600.0,
                   help="overall budget in seconds")
    p.add_argument("--gemm-size", type=_number(int, 16), default=None,
                   help="GEMM edge (default 8192 on GPU, 512 on CPU)")
    p.add_argument("--quick", action="store_true", help="fewer steps, less data, smaller GEMM")
    return p


# ---------------------------------------------------------------------------------- report helpers
def _new_report(require):
    return {"payload": "torch_smoke", "payload_version": PAYLOAD_VERSION, "level": None,
            "require": require, "passed": False, "checks": [],
            "versions": {"python": platform.python_version(), "torch": None, "cuda": None,
                         "cudnn": None, "nccl": None, "driver": None},
            "device": {"name": None, "compute_capability": None, "count": 0,
                       "memory_total_mib": None},
            "metrics": {}, "telemetry": {}, "multi_gpu": None, "errors": []}


def _check(rep, name, passed, detail, **extra):
    rep["checks"].append(dict({"name": name, "passed": bool(passed), "detail": detail}, **extra))
    log(f"{'PASS' if passed else 'FAIL'} {name}: {detail}")


def _skip(rep, name, why):
    """Not applicable: passes, except when a GPU was required and we are not on one."""
    gpu_missing = rep["require"] == "cuda" and rep["level"] != "cuda"
    if gpu_missing:
        why += " (--require cuda: a GPU check that cannot run fails)"
    _check(rep, name, not gpu_missing, why, skipped=True)


def _guarded(rep, name, fn, *args):
    """Run check `fn`; an exception becomes a failed check (out-of-memory with advice)."""
    try:
        return fn(rep, *args)
    except Exception as exc:
        log(traceback.format_exc())
        message = f"{type(exc).__name__}: {str(exc).strip()[:500]}"
        oom_type = getattr(torch.cuda, "OutOfMemoryError", ())
        if isinstance(exc, oom_type) or "out of memory" in str(exc).lower():
            message = f"{OOM_ADVICE} [{message}]"
            with contextlib.suppress(Exception):
                torch.cuda.empty_cache()
        _check(rep, name, False, message)
        rep["errors"].append(f"{name}: {message}")
        return None


def _clean(value):  # NaN and inf are not JSON
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return [_clean(v) for v in value] if isinstance(value, (list, tuple)) else value


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _half_dtype():
    try:
        bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch < 2.3
        bf16 = torch.cuda.is_bf16_supported()
    return torch.bfloat16 if bf16 else torch.float16


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


# ---------------------------------------------------------------------------------- model, data
def make_model(classes=4):
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(32 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, classes))


def make_data(n, seed, device, classes=4):
    """Gaussian blobs in 3x16x16: fixed class centres (one task), samples drawn from `seed`."""
    gen = torch.Generator().manual_seed(1234)
    centres = torch.randn(classes, 3, 16, 16, generator=gen) * 0.5
    gen.manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=gen)
    return (centres[y] + torch.randn(n, 3, 16, 16, generator=gen)).to(device), y.to(device)


def train_loop(model, data, steps, batch, device, amp_dtype=None, scaler=None, lr=3e-3):
    """Adam over consecutive slices of `data`; returns (losses, seconds per synchronized step)."""
    x, y = data
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    b = min(batch, x.shape[0])
    losses, times = [], []
    model.train()
    for step in range(steps):
        lo = (step * b) % (x.shape[0] - b + 1)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        amp = torch.autocast(device.type, dtype=amp_dtype) if amp_dtype else None
        with amp or contextlib.nullcontext():
            loss = F.cross_entropy(model(x[lo:lo + b]), y[lo:lo + b])
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        _sync(device)
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach().float()))
    return losses, times


def loss_trend(losses):
    """(first, last, ratio, ok): means of the first and last few losses; ok when ratio < 0.7."""
    k = max(1, min(5, len(losses) // 4))
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    ratio = last / first if first > 0 else float("inf")
    return first, last, ratio, all(math.isfinite(v) for v in losses) and ratio < LOSS_RATIO_MAX


def _trend(first, last, ratio):
    return f"loss {first:.3f} -> {last:.3f} (ratio {ratio:.2f}, must be < {LOSS_RATIO_MAX})"


# ---------------------------------------------------------------------------------- versions
def _fmt_code(v, big):
    """cuDNN >= 9 and NCCL >= 2.9 encode MMmmpp (90100 = 9.1.0); older ones Mmpp (8902 = 8.9.2)."""
    if isinstance(v, (tuple, list)):
        return ".".join(str(p) for p in v)
    if not isinstance(v, int) or v <= 0:
        return None
    major, rest = (v // 10000, v % 10000) if v >= big else (v // 1000, v % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def read_versions():
    def safe(fn):
        with contextlib.suppress(Exception):
            return fn()
        return None
    cuda = torch.version.cuda
    return {"torch": torch.__version__, "cuda": cuda,
            "cudnn": safe(lambda: _fmt_code(torch.backends.cudnn.version(), 90000)),
            "nccl": safe(lambda: _fmt_code(torch.cuda.nccl.version(), 10000)) if cuda else None}


def version_matches(actual, wanted, parts):
    """parts None: equal without +local; else the first `parts` dot-components `wanted` has."""
    if actual is None:
        return False
    a, w = str(actual).split("+")[0].split("."), str(wanted).split("+")[0].split(".")
    return a == w if parts is None else a[:min(parts, len(w))] == w[:parts]


def check_versions(rep, expect):
    v = rep["versions"]
    rules = {"framework": (v["torch"], None), "cuda": (v["cuda"], 2), "cudnn": (v["cudnn"], 3),
             "nccl": (v["nccl"], 3)}
    notes, bad = [], 0
    for key in EXPECT_KEYS:
        if (expect or {}).get(key) is not None:
            actual, parts = rules[key]
            ok = version_matches(actual, expect[key], parts)
            bad += not ok
            verdict = "matches" if ok else "MISMATCH, expected"
            notes.append(f"{key} {actual} {verdict} {expect[key]}")
    _check(rep, "versions", bad == 0, "; ".join(notes) or "no --expect given", mismatches=bad)


# ---------------------------------------------------------------------------------- GPU-only checks
def _smi(query, timeout):
    """Rows of `nvidia-smi --query-gpu=QUERY --format=csv,noheader,...` as lists of strings."""
    out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=timeout, check=False)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"exit {out.returncode}: {(out.stderr or out.stdout).strip()[:300]}")
    return [[c.strip() for c in line.split(",")] for line in out.stdout.strip().splitlines()]


def check_nvidia_smi(rep):
    try:
        rows = _smi("name,driver_version", 30)
    except (OSError, subprocess.TimeoutExpired, RuntimeError) as exc:
        return _check(rep, "nvidia_smi", False, f"nvidia-smi failed: {exc}")
    rep["versions"]["driver"] = rows[0][-1]
    return _check(rep, "nvidia_smi", True,
                  f"{len(rows)} GPU(s), {rows[0][0]}, driver {rows[0][-1]}", gpus=len(rows))


def check_cuda_available(rep, available):
    if available and rep["level"] == "cuda":
        return _check(rep, "cuda_available", True,
                      f"torch.cuda.is_available(), {torch.cuda.device_count()} device(s)")
    if rep["require"] != "cuda":
        return _skip(rep, "cuda_available", "--require cpu" if available else "no GPU: CPU level")
    why = ("CPU-only torch build" if not torch.version.cuda
           else "no GPU visible to CUDA (driver? --gpus? CUDA_VISIBLE_DEVICES?)")
    return _check(rep, "cuda_available", False,
                  f"GPU requested (--require cuda) but torch.cuda.is_available() is False: {why}")


def check_device(rep, device):
    props = torch.cuda.get_device_properties(device)
    cc, mib = f"{props.major}.{props.minor}", props.total_memory // 2**20
    rep["device"].update(name=props.name, compute_capability=cc, count=torch.cuda.device_count(),
                         memory_total_mib=mib)
    _check(rep, "device", bool(props.name), f"{props.name}, cc {cc}, {mib} MiB",
           multiprocessors=props.multi_processor_count)


def arch_match(arches, cc):
    """The best torch.cuda.get_arch_list() entry that runs on capability `cc` (SASS > PTX)."""
    found = []
    for arch in arches:
        m = re.fullmatch(r"(sm|compute)_(\d+)(\d)([a-z]?)", arch)
        if not m:
            continue
        sass, ver = m.group(1) == "sm", (int(m.group(2)), int(m.group(3)))
        if m.group(4) == "a":  # arch-specific (sm_90a): this exact cc only
            ok = ver == cc
        elif sass:  # SASS: same major, same or lower minor
            ok = ver[0] == cc[0] and ver[1] <= cc[1]
        else:  # PTX: JIT-compiled for any newer GPU
            ok = ver <= cc
        if ok:
            found.append((sass, ver, arch))
    return max(found)[2] if found else None


def check_arch(rep, device):
    """Kernels for this GPU in the build, else 'no kernel image is available for execution'."""
    cc, arches = torch.cuda.get_device_capability(device), torch.cuda.get_arch_list()
    found = arch_match(arches, cc)
    if not found:
        how = "none runs on it ('no kernel image is available')"
    elif found.startswith("compute"):
        how = f"PTX {found}, JIT-compiled at first launch"
    else:
        how = f"SASS {found}"
    try:
        launched = float((torch.ones(4, device=device) * 2).sum()) == 8.0
        note = "kernel launch ok"
    except Exception as exc:
        launched, note = False, f"kernel launch failed: {str(exc).strip()[:200]}"
    _check(rep, "cuda_arch", bool(found) and launched,
           f"device sm_{cc[0]}{cc[1]}; build has {' '.join(arches) or '(none)'}: {how}; {note}")


def check_cudnn(rep, device):
    cudnn = torch.backends.cudnn
    if not cudnn.is_available() or not cudnn.enabled:
        return _check(rep, "cudnn_conv", False,
                      f"cuDNN available {cudnn.is_available()}, enabled {cudnn.enabled}")
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(8, 16, 32, 32, generator=gen), torch.randn(32, 16, 3, 3, generator=gen)
    xc, wc = x.to(device).requires_grad_(), w.to(device).requires_grad_()
    out = F.conv2d(xc, wc, padding=1)
    out.square().mean().backward()
    _sync(device)
    ref = F.conv2d(x, w, padding=1)
    err = float((out.detach().cpu() - ref).abs().max() / ref.abs().max())  # TF32 convs: ~1e-3
    grads_ok = all(bool(torch.isfinite(g).all() and g.abs().sum() > 0) for g in (xc.grad, wc.grad))
    return _check(rep, "cudnn_conv", grads_ok and err < 1e-2,
                  f"cuDNN {rep['versions']['cudnn']} conv2d forward+backward: gradients "
                  f"{'finite' if grads_ok else 'NOT finite or zero'}, "
                  f"max rel. error vs CPU {err:.1e} (limit 1e-2)", rel_error=err)


def check_memory(rep, device):
    cuda = torch.cuda
    vals = {"memory_allocated_mib": cuda.memory_allocated(device),
            "memory_reserved_mib": cuda.memory_reserved(device),
            "max_memory_allocated_mib": cuda.max_memory_allocated(device)}
    vals = {k: round(v / 2**20, 1) for k, v in vals.items()}
    rep["metrics"].update(vals)
    _check(rep, "memory", vals["max_memory_allocated_mib"] > 0,
           "allocated {memory_allocated_mib} MiB, reserved {memory_reserved_mib} MiB, "
           "peak {max_memory_allocated_mib} MiB".format(**vals), **vals)


# ---------------------------------------------------------------------------------- training checks
def check_train(rep, device, data, steps, batch):
    torch.manual_seed(0)
    model = make_model().to(device)
    losses, times = train_loop(model, data, steps, batch, device)
    first, last, ratio, ok = loss_trend(losses)
    rep["metrics"].update(loss_first=first, loss_last=last, loss_ratio=ratio, steps=steps,
                          batch=batch)
    _check(rep, "train", ok, f"fp32 on {device.type}, {steps} steps: {_trend(first, last, ratio)}",
           loss_first=first, loss_last=last, loss_ratio=ratio)
    return model, times


def check_model_on_cuda(rep, model):
    param = next(model.parameters())
    _check(rep, "model_on_cuda", param.is_cuda, f"model parameters on {param.device}")


def check_amp(rep, device, data, steps, batch):
    """bf16 autocast (fp16 + GradScaler on GPUs without bf16); the loss must go down too."""
    dtype, scaler = (_half_dtype() if device.type == "cuda" else torch.bfloat16), None
    if dtype == torch.float16:
        try:
            scaler = torch.amp.GradScaler("cuda")
        except (AttributeError, TypeError):  # torch < 2.3
            scaler = torch.cuda.amp.GradScaler()
    if device.type == "cpu":
        try:
            with torch.autocast("cpu", dtype=dtype):
                torch.ones(2, 2) @ torch.ones(2, 2)
        except Exception as exc:
            return _skip(rep, "amp", f"bf16 autocast unsupported on this CPU build: {exc}")
    torch.manual_seed(0)
    losses, _ = train_loop(make_model().to(device), data, steps, batch, device, dtype, scaler)
    first, last, ratio, ok = loss_trend(losses)
    name = _dtype_name(dtype) + (" + GradScaler" if scaler else "")
    rep["metrics"].update(amp_dtype=_dtype_name(dtype), amp_loss_first=first, amp_loss_last=last,
                          amp_loss_ratio=ratio)
    return _check(rep, "amp", ok, f"autocast {name}: {_trend(first, last, ratio)}",
                  loss_first=first, loss_last=last, loss_ratio=ratio)


def check_checkpoint(rep, device, model, data):
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        path = os.path.join(tmp, "model.pt")
        torch.save(model.state_dict(), path)
        size = os.path.getsize(path)
        torch.manual_seed(1)  # other weights until the load
        fresh = make_model().to(device)
        try:
            state = torch.load(path, map_location=device, weights_only=True)
        except TypeError:  # torch < 1.13
            state = torch.load(path, map_location=device)
        fresh.load_state_dict(state)
    model.eval()
    fresh.eval()
    flags = torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True)
    with torch.no_grad(), flags:
        same_out = torch.equal(model(data[0][:32]), fresh(data[0][:32]))
    pairs = zip(model.state_dict().values(), fresh.state_dict().values())
    same_params = all(torch.equal(a, b) for a, b in pairs)
    rep["metrics"]["checkpoint_bytes"] = size
    _check(rep, "checkpoint", same_params and same_out,
           f"torch.save/torch.load in {tempfile.gettempdir()}: {size} bytes, parameters "
           f"{'equal' if same_params else 'DIFFER'}, outputs {'equal' if same_out else 'DIFFER'}",
           bytes=size)


def _gemm_seconds(device, n, dtype, iters):
    torch.manual_seed(2)
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    c = torch.mm(a, b)
    for _ in range(2):  # warm-up
        torch.mm(a, b, out=c)
    _sync(device)
    if device.type != "cuda":
        t0 = time.perf_counter()
        for _ in range(iters):
            torch.mm(a, b, out=c)
        return time.perf_counter() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        torch.mm(a, b, out=c)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1000.0


def check_throughput(rep, device, times, batch, gemm_n, quick):
    warm = min(3, len(times) // 3)
    step_s = sum(times[warm:]) / len(times[warm:])
    cuda = device.type == "cuda"
    dtype = _half_dtype() if cuda else torch.float32
    iters = (5 if quick else 20) if cuda else (3 if quick else 10)
    tflops = 2.0 * gemm_n ** 3 * iters / _gemm_seconds(device, gemm_n, dtype, iters) / 1e12
    vals = {"samples_per_s": batch / step_s, "step_time_ms": step_s * 1000, "gemm_size": gemm_n,
            "gemm_dtype": _dtype_name(dtype), "gemm_tflops": tflops, "gemm_gflops": tflops * 1000}
    rep["metrics"].update(vals)
    speed = f"{tflops:.1f} TFLOP/s" if cuda else f"{tflops * 1000:.1f} GFLOP/s"
    _check(rep, "throughput", all(math.isfinite(v) and v > 0 for v in (step_s, tflops)),
           f"{batch / step_s:.0f} samples/s, {step_s * 1000:.2f} ms/step after {warm} warm-up; "
           f"{_dtype_name(dtype)} GEMM {gemm_n}x{gemm_n}: {speed}", **vals)


# ---------------------------------------------------------------------------------- telemetry
class Telemetry:
    """nvidia-smi every `interval` s in a thread; a sample is the max over the GPUs it lists."""
    FIELDS = (("utilization.gpu", "utilization_gpu_pct"), ("memory.used", "memory_used_mib"),
              ("power.draw", "power_draw_w"), ("temperature.gpu", "temperature_c"))

    def __init__(self, interval=0.5):
        self.interval, self.samples, self.error = interval, [], None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)

    def _sample(self):
        rows = _smi(",".join(field for field, _ in self.FIELDS), 5)
        sample = []
        for i in range(len(self.FIELDS)):
            vals = []
            for row in rows:
                with contextlib.suppress(ValueError, IndexError):  # "[N/A]" is left out
                    vals.append(float(row[i]))
            sample.append(max(vals) if vals else None)
        self.samples.append(sample)

    def _loop(self):
        while not self._stop.is_set():
            try:
                self._sample()
            except Exception as exc:
                self.error = f"nvidia-smi: {type(exc).__name__}: {exc}"
                return
            self._stop.wait(self.interval)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)
        if self.error is None:
            with contextlib.suppress(Exception):
                self._sample()
        out = {"source": "nvidia-smi", "interval_s": self.interval, "samples": len(self.samples),
               "error": self.error}
        for i, (_, key) in enumerate(self.FIELDS):
            vals = [s[i] for s in self.samples if s[i] is not None]
            out[key] = {"max": max(vals), "mean": round(sum(vals) / len(vals), 2)} if vals else None
        return out


# ---------------------------------------------------------------------------------- multi-GPU
def _mgpu_worker(rank, world, port, cfg, results):
    """One rank: all-reduce (correctness, bandwidth), then DDP training; rank 0 reports."""
    os.dup2(2, 1)  # NCCL_DEBUG writes to stdout, where only the report may go
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    try:
        torch.cuda.set_device(rank)
        dev = torch.device("cuda", rank)
        dist.init_process_group("nccl", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=cfg["budget"]))
        buf = torch.full((cfg["mb"] * 2**20 // 4,), float(rank + 1), device=dev)
        dist.all_reduce(buf)
        ok = torch.tensor([int(bool((buf == world * (world + 1) / 2).all()))], device=dev)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN)  # correct on every rank
        buf.zero_()
        for _ in range(2):
            dist.all_reduce(buf)
        torch.cuda.synchronize(dev)
        t0 = time.perf_counter()
        for _ in range(cfg["iters"]):
            dist.all_reduce(buf)
        torch.cuda.synchronize(dev)
        secs = (time.perf_counter() - t0) / cfg["iters"]
        algbw = buf.numel() * 4 / secs / 1e9
        torch.manual_seed(0)
        model = torch.nn.parallel.DistributedDataParallel(make_model().to(dev), device_ids=[rank])
        data = make_data(cfg["batch"] * 4, 10 + rank, dev)
        first, last, ratio, trained = loss_trend(
            train_loop(model, data, cfg["steps"], cfg["batch"], dev)[0])
        if rank == 0:
            results.put({"allreduce_mb": cfg["mb"], "allreduce_dtype": "float32",
                         "allreduce_correct": bool(ok.item()), "allreduce_ms": secs * 1000,
                         "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (world - 1) / world,
                         "ddp_steps": cfg["steps"], "ddp_loss_first": first,
                         "ddp_loss_last": last, "ddp_loss_ratio": ratio, "ddp_ok": trained})
    except Exception as exc:
        results.put({"error": f"rank {rank}: {type(exc).__name__}: {str(exc).strip()[:300]}"})
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _collect(procs, results, end):
    """Rank 0's result and every rank's errors, polling until `end` or until all ranks exit."""
    result, errors = None, []
    while time.monotonic() < end:
        try:
            msg = results.get(timeout=0.5)
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                break
            continue
        if "error" in msg:
            errors.append(msg["error"])
        else:
            result, end = msg, min(end, time.monotonic() + 30)  # 30 s more for teardown
    return result, errors


def run_multi_gpu(rep, opts, deadline):
    import torch.multiprocessing as tmp
    world, left = torch.cuda.device_count(), deadline - time.monotonic()
    budget = left - min(10.0, left / 4)  # ends, children killed, before the overall --timeout
    if budget < 2:
        return _check(rep, "multi_gpu", False, f"not started: {max(left, 0):.0f} s left")
    cfg = {"budget": budget, "mb": 64 if opts.quick else 256, "iters": 3 if opts.quick else 10,
           "steps": min(max(opts.steps or 30, 10), 30), "batch": opts.batch}
    with socket.socket() as s:  # a free localhost port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = tmp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_mgpu_worker, args=(r, world, port, cfg, results), daemon=True)
             for r in range(world)]
    _CHILDREN.extend(procs)
    log(f"multi-GPU: {world} ranks, NCCL via 127.0.0.1:{port}, time limit {budget:.0f} s")
    t0 = time.monotonic()
    for p in procs:
        p.start()
    result, errors = _collect(procs, results, t0 + budget)
    hung = [i for i, p in enumerate(procs) if p.is_alive()]
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(5)
        if p.is_alive():
            p.kill()
        p.join(5)
    errors += [f"rank {i} exit code {p.exitcode}" for i, p in enumerate(procs)
               if p.exitcode and i not in hung]
    errors += [f"ranks {hung} terminated in teardown"] if hung and result else []
    rep["multi_gpu"] = dict({"world_size": world, "timed_out": bool(hung) and result is None,
                             "errors": errors, "duration_s": round(time.monotonic() - t0, 2)},
                            **(result or {}))
    if result is None:
        why = (f"multi_gpu timed out after {budget:.0f} s (ranks {hung} still running, terminated)"
               if hung else "no result from rank 0")
        return _check(rep, "multi_gpu", False, why + (f": {errors}" if errors else ""))
    r = result
    _check(rep, "multi_gpu_allreduce", r["allreduce_correct"],
           f"{world} GPUs, {cfg['mb']} MB float32 all-reduce "
           f"{'correct' if r['allreduce_correct'] else 'WRONG SUM'}; algbw "
           f"{r['algbw_gbps']:.1f} GB/s, busbw {r['busbw_gbps']:.1f} GB/s",
           algbw_gbps=r["algbw_gbps"], busbw_gbps=r["busbw_gbps"])
    return _check(rep, "multi_gpu_ddp", r["ddp_ok"], f"DDP, {cfg['steps']} steps: "
                  + _trend(r["ddp_loss_first"], r["ddp_loss_last"], r["ddp_loss_ratio"]),
                  loss_ratio=r["ddp_loss_ratio"])


# ---------------------------------------------------------------------------------- driver
def _run_into(rep, opts, deadline):
    t0 = time.monotonic()
    if torch is None:
        rep["level"] = "cpu"
        rep["errors"].append(f"import torch: {_TORCH_ERROR}")
        return _check(rep, "torch_import", False, f"import torch failed: {_TORCH_ERROR}")
    try:
        available = torch.cuda.is_available()
    except Exception as exc:
        available = False
        rep["errors"].append(f"torch.cuda.is_available() raised {exc}")
    use_cuda = available and opts.require != "cpu"
    rep["level"] = "cuda" if use_cuda else "cpu"
    device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")
    steps = opts.steps or (12 if opts.quick else 30)
    gemm_n = opts.gemm_size or ((4096 if opts.quick else 8192) if use_cuda else 512)
    rep["versions"].update(read_versions())
    log(f"torch {torch.__version__}, level {rep['level']} (--require {opts.require}), "
        f"{steps} steps, batch {opts.batch}")
    cpu_why = "CPU level (--require cpu)" if available else "no GPU: CPU level"

    def gpu_check(name, fn, *args):  # a GPU-only check, "not applicable" on the CPU
        return _guarded(rep, name, fn, *args) if use_cuda else _skip(rep, name, cpu_why)

    if opts.require == "cuda":  # nvidia-smi tells why a requested GPU is missing
        _guarded(rep, "nvidia_smi", check_nvidia_smi)
    else:
        gpu_check("nvidia_smi", check_nvidia_smi)
    check_cuda_available(rep, available)
    gpu_check("device", check_device, device)
    gpu_check("cuda_arch", check_arch, device)
    if not use_cuda:
        rep["device"].update(name=platform.processor() or platform.machine(), count=0)
    _guarded(rep, "versions", check_versions, opts.expect)

    torch.manual_seed(0)
    data = make_data(max(4 * opts.batch, 512 if opts.quick else 2048), 0, device)
    batch = min(opts.batch, len(data[1]))
    telemetry = Telemetry().start() if use_cuda else None
    try:
        trained = _guarded(rep, "train", check_train, device, data, steps, batch)
        model, times = trained or (None, None)
        gpu_check("model_on_cuda", check_model_on_cuda,
                  model if model is not None else make_model().to(device))
        _guarded(rep, "amp", check_amp, device, data, steps, batch)
        gpu_check("cudnn_conv", check_cudnn, device)
        if model is None:
            _check(rep, "checkpoint", False, "no trained model (training failed)")
            _check(rep, "throughput", False, "no training step times (training failed)")
        else:
            _guarded(rep, "checkpoint", check_checkpoint, device, model, data)
            _guarded(rep, "throughput", check_throughput, device, times, batch, gemm_n, opts.quick)
    finally:
        rep["telemetry"] = (telemetry.stop() if telemetry
                            else {"source": None, "samples": 0, "error": cpu_why})
    gpu_check("memory", check_memory, device)
    if opts.multi_gpu and use_cuda and torch.cuda.device_count() > 1:
        _guarded(rep, "multi_gpu", run_multi_gpu, opts, deadline)
    elif opts.multi_gpu:
        count = torch.cuda.device_count() if use_cuda else 0
        _skip(rep, "multi_gpu", f"needs more than one GPU; {count} in use")
    rep["metrics"]["duration_s"] = round(time.monotonic() - t0, 2)
    return None


def _finish(rep):
    rep["passed"] = bool(rep["checks"]) and all(c["passed"] for c in rep["checks"])
    return rep


def run(options):
    """Run every check and return the report; `options` is build_parser()'s Namespace or a dict."""
    opts = options
    if not isinstance(options, argparse.Namespace):
        opts = build_parser().parse_args([])
        for key, val in dict(options or {}).items():
            if key == "expect" and isinstance(val, str):
                val = _expect_arg(val)
            setattr(opts, key.replace("-", "_"), val)
    rep = _new_report(opts.require)
    _run_into(rep, opts, time.monotonic() + opts.timeout)
    return _finish(rep)


def _emit(rep, stream):
    text = None
    for _ in range(20):  # the watchdog may catch the report mid-update
        with contextlib.suppress(RuntimeError):
            text = json.dumps(_clean(rep))
            break
        time.sleep(0.05)
    stream.write((text or json.dumps(_clean(dict(rep, checks=[])))) + "\n")
    stream.flush()


def main(argv=None):
    real_stdout = sys.stdout
    try:
        opts = build_parser().parse_args(argv)
    except BadArguments as exc:
        build_parser().print_usage(sys.stderr)
        log(f"bad arguments: {exc}")
        rep = _new_report(None)
        rep["errors"].append(f"bad arguments: {exc}")
        _emit(rep, real_stdout)
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    rep, emitted = _new_report(opts.require), threading.Lock()

    def on_timeout():  # a hung CUDA call cannot be interrupted: report what there is, and exit
        if emitted.acquire(blocking=False):
            rep["checks"].append({"name": "timeout", "passed": False, "detail":
                                  f"--timeout {opts.timeout:g} s exceeded; the report is partial"})
            rep["passed"] = False
            for proc in _CHILDREN:
                with contextlib.suppress(Exception):
                    proc.kill()
            _emit(rep, real_stdout)
            os._exit(1)

    start = _T_START if __name__ == "__main__" else time.monotonic()  # a script: its own start
    deadline = start + opts.timeout
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), on_timeout)
    watchdog.daemon = True
    watchdog.start()
    with contextlib.redirect_stdout(sys.stderr):  # stray prints must not corrupt the report
        try:
            _run_into(rep, opts, deadline)
        except Exception as exc:
            log(traceback.format_exc())
            _check(rep, "payload", False, f"unexpected {type(exc).__name__}: {exc}")
            rep["errors"].append(f"payload: {type(exc).__name__}: {exc}")
    watchdog.cancel()
    if not emitted.acquire(blocking=False):
        time.sleep(60)  # the watchdog is writing the report and ends the process
        return 1
    _emit(_finish(rep), real_stdout)
    passed = sum(c["passed"] for c in rep["checks"])
    log(f"{'PASSED' if rep['passed'] else 'FAILED'}: {passed}/{len(rep['checks'])} checks")
    return 0 if rep["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
