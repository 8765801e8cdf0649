#!/usr/bin/env python3
"""envgen smoke-training payload for PyTorch images, and the torch/CUDA checks every torch-based
payload (Lightning, Transformers, Accelerate) shares.

Copied into images beside _harness.py and run as ``python /opt/envgen/torch_smoke.py [options]``;
importable as ``envgen.smoke.torch_smoke`` too (``main(argv) -> int``, ``run(options) -> dict``).
Imports the standard library, the harness and torch only. Prints exactly one JSON report on
stdout (logs go to stderr); exits 0 when every check passed, 1 when any failed, 2 on bad arguments.
A torch-based payload calls ``torch_run(rep, opts, deadline, its_training_checks)``.
"""
# ruff: noqa: BLE001  (catching everything is the point: a failing check is reported, never a crash)
import contextlib
import datetime
import functools
import math
import os
import platform
import queue
import re
import socket
import sys
import tempfile
import time

if __package__:  # imported as envgen.smoke.torch_smoke
    from envgen.smoke import _harness as h
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h

# Before anything NCCL: NVLink SHARP / multicast stays off (it hangs in many containers).
for _key in ("NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"):
    os.environ.setdefault(_key, "0" if _key == "NCCL_NVLS_ENABLE" else "1")

_T_IMPORT = time.perf_counter()
try:
    import torch
    import torch.nn.functional as F
    _TORCH_ERROR = None
except Exception as _exc:  # a broken torch is reported, not a crash
    torch = F = None
    _TORCH_ERROR = f"{type(_exc).__name__}: {_exc}"
# start-up: how long `import torch` took, and how long after the process started it was done
_IMPORT_S, _IMPORT_AGE_S = time.perf_counter() - _T_IMPORT, h.process_age()

VERSION_KEYS = ("torch", "cuda", "cudnn", "nccl", "driver")  # what every torch payload reports


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _half_dtype():
    try:
        bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # torch < 2.3
        bf16 = torch.cuda.is_bf16_supported()
    return torch.bfloat16 if bf16 else torch.float16


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def mixed_dtype(device):
    """(dtype, None) for mixed precision on `device`: bf16 on a GPU that has it, else fp16; bf16
    on the CPU. (None, why) where this torch build cannot autocast bf16 on the CPU."""
    if device.type == "cuda":
        return _half_dtype(), None
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            torch.ones(2, 2) @ torch.ones(2, 2)
    except Exception as exc:
        return None, f"bf16 autocast unsupported on this CPU build: {exc}"
    return torch.bfloat16, None


def cuda_oom(exc):
    """The harness's out-of-memory hook: classify `exc`, free the cache for the checks after it."""
    oom_type = getattr(torch.cuda, "OutOfMemoryError", ())
    if isinstance(exc, oom_type) or "out of memory" in str(exc).lower():
        with contextlib.suppress(Exception):
            torch.cuda.empty_cache()
        return True
    return False


guarded = functools.partial(h.guarded, oom=cuda_oom)


gpu_check = functools.partial(h.gpu_check, oom=cuda_oom)


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


def data_size(opts):
    return max(4 * opts.batch, 512 if opts.quick else 2048)


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
    """torch, CUDA, cuDNN and NCCL as loaded in this process (not as pinned or built against)."""
    def safe(fn):
        with contextlib.suppress(Exception):
            return fn()
        return None
    cuda = torch.version.cuda
    return {"torch": torch.__version__, "cuda": cuda,
            "cudnn": safe(lambda: _fmt_code(torch.backends.cudnn.version(), 90000)),
            "nccl": safe(lambda: _fmt_code(torch.cuda.nccl.version(), 10000)) if cuda else None}


# ---------------------------------------------------------------------------------- GPU-only checks
def check_cuda_available(rep, available):
    if available and rep["level"] == "cuda":
        return h.check(rep, "cuda_available", True,
                       f"torch.cuda.is_available(), {torch.cuda.device_count()} device(s)")
    if rep["require"] != "cuda":
        return h.skip(rep, "cuda_available", "--require cpu" if available else "no GPU: CPU level")
    why = ("CPU-only torch build" if not torch.version.cuda
           else "no GPU visible to CUDA (driver? --gpus? CUDA_VISIBLE_DEVICES?)")
    return h.check(rep, "cuda_available", False,
                   f"GPU requested (--require cuda) but torch.cuda.is_available() is False: {why}")


def check_device(rep, device):
    props = torch.cuda.get_device_properties(device)
    cc, mib = f"{props.major}.{props.minor}", props.total_memory // 2**20
    rep["device"].update(name=props.name, compute_capability=cc, count=torch.cuda.device_count(),
                         memory_total_mib=mib)
    h.check(rep, "device", bool(props.name), f"{props.name}, cc {cc}, {mib} MiB",
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
    h.check(rep, "cuda_arch", bool(found) and launched,
            f"device sm_{cc[0]}{cc[1]}; build has {' '.join(arches) or '(none)'}: {how}; {note}")


def check_cudnn(rep, device):
    cudnn = torch.backends.cudnn
    if not cudnn.is_available() or not cudnn.enabled:
        return h.check(rep, "cudnn_conv", False,
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
    return h.check(rep, "cudnn_conv", grads_ok and err < 1e-2,
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
    h.check(rep, "memory", vals["max_memory_allocated_mib"] > 0,
            "allocated {memory_allocated_mib} MiB, reserved {memory_reserved_mib} MiB, "
            "peak {max_memory_allocated_mib} MiB".format(**vals), **vals)


# ---------------------------------------------------------------------------------- shared checks
def check_model_on_cuda(rep, device, what="model parameters"):
    """`device`: where the parameters were while training (some frameworks move them back)."""
    h.check(rep, "model_on_cuda", device.type == "cuda", f"{what} on {device}")


def output_dtypes(layer):
    """The set of dtypes `layer`'s outputs have had (a forward hook): where mixed precision
    shows, as the loss the framework hands back is float32 either way."""
    seen = set()
    layer.register_forward_hook(lambda _module, _inputs, out: seen.add(dtype_name(out.dtype)))
    return seen


def torch_checks(rep, opts):
    """Before training: torch imported; the GPU (nvidia-smi, CUDA, the device, kernels for its
    architecture); the versions loaded against --expect. (use_cuda, device); device is None
    where torch did not import."""
    if torch is None:
        rep["level"] = "cpu"
        rep["errors"].append(f"import torch: {_TORCH_ERROR}")
        h.check(rep, "torch_import", False, f"import torch failed: {_TORCH_ERROR}")
        return False, None
    try:
        available = torch.cuda.is_available()
    except Exception as exc:
        available = False
        rep["errors"].append(f"torch.cuda.is_available() raised {exc}")
    use_cuda = available and opts.require != "cpu"
    rep["level"] = "cuda" if use_cuda else "cpu"
    device = torch.device("cuda", 0) if use_cuda else torch.device("cpu")
    rep["versions"].update(read_versions())
    h.log(rep["payload"], f"torch {torch.__version__}, level {rep['level']} (--require "
                          f"{opts.require}), {h.train_steps(opts)} steps, batch {opts.batch}")
    first_kernel = guarded(rep, "startup", first_kernel_s, device) if use_cuda else None
    guarded(rep, "startup", h.check_startup, "torch", _IMPORT_S, _IMPORT_AGE_S, first_kernel)
    h.nvidia_smi_check(rep)
    check_cuda_available(rep, available)
    gpu_check(rep, "device", check_device, device)
    gpu_check(rep, "cuda_arch", check_arch, device)
    if not use_cuda:
        rep["device"].update(name=platform.processor() or platform.machine(), count=0)
    h.check_expect(rep, opts.expect)
    return use_cuda, device


def first_kernel_s(_rep, device):
    """Seconds from the process's start until its first GPU kernel had run (CUDA's start-up
    and the context included)."""
    torch.ones(1, device=device).add_(1)
    torch.cuda.synchronize(device)
    return h.process_age()


def _habits():
    if __package__:
        from envgen.smoke import torch_habits
    else:
        import torch_habits
    return torch_habits


def torch_run(rep, opts, deadline, train_checks):
    """A torch payload's run: torch_checks; its own `train_checks(rep, opts, device)` (None where
    its framework did not import) while nvidia-smi samples; cuDNN, memory, and --multi-gpu."""
    t0 = time.monotonic()
    use_cuda, device = torch_checks(rep, opts)
    if device is None:
        return
    telemetry = h.Telemetry().start() if use_cuda else None
    try:
        if train_checks is not None:
            train_checks(rep, opts, device)
    finally:
        rep["telemetry"] = (telemetry.stop() if telemetry
                            else {"source": None, "samples": 0, "error": h.cpu_why(rep)})
    guarded(rep, "dataloader", check_dataloader, device)
    gpu_check(rep, "cudnn_conv", check_cudnn, device)
    gpu_check(rep, "memory", check_memory, device)
    if getattr(opts, "measure", "basic") == "full":   # after memory: it resets the peaks
        step_rate = rep["metrics"].get("samples_per_s") or 0.0
        _habits().run_habits(rep, device, step_rate, gpu_check, guarded)
    if opts.multi_gpu and use_cuda and torch.cuda.device_count() > 1:
        guarded(rep, "multi_gpu", run_multi_gpu, opts, deadline)
    elif opts.multi_gpu:   # asked for and not run: a failure, never a skip that passes
        count = torch.cuda.device_count() if use_cuda else 0
        h.check(rep, "multi_gpu", False,
                f"--multi-gpu asked for, but it needs more than one GPU; {count} in use")
    rep["metrics"]["duration_s"] = round(time.monotonic() - t0, 2)


# A DataLoader's worker processes hand each batch over shared memory (/dev/shm). Docker gives a
# container 64 MB of it unless told otherwise, and a loader with workers then dies mid-epoch
# with a bus error. Batches of 24 MiB, 2 workers prefetching 2 each: about 96 MiB in flight.
LOADER_WORKERS, LOADER_BATCHES, LOADER_BATCH_MIB = 2, 12, 24
shm_mib = h.shm_mib


class _Batches(torch.utils.data.Dataset if torch is not None else object):
    def __len__(self):
        return LOADER_BATCHES

    def __getitem__(self, i):
        return torch.full((LOADER_BATCH_MIB * 2**18,), float(i))   # float32: 4 bytes each


def check_dataloader(rep, device):
    """A DataLoader with worker processes (and pinned memory on CUDA) delivers every batch
    intact; when it cannot, the failure names the shared memory and the fix."""
    shm = shm_mib()
    pin = device.type == "cuda"
    where = f"/dev/shm {shm} MiB" if shm is not None else "no /dev/shm"
    loader = torch.utils.data.DataLoader(_Batches(), batch_size=None,
                                         num_workers=LOADER_WORKERS, prefetch_factor=2,
                                         pin_memory=pin, timeout=60)
    t0 = time.monotonic()
    try:
        seen = []
        for batch in loader:
            batch = batch.to(device, non_blocking=pin)
            seen.append(float(batch[0]))
    except Exception as exc:   # a worker killed by SIGBUS, or "No space left on device"
        text = " ".join(str(exc).split())[:300]
        return h.check(rep, "dataloader", False,
                       f"{h.shm_fix(shm)} ({LOADER_WORKERS} workers failed: "
                       f"{type(exc).__name__}: {text})", shm_mib=shm, fix=h.shm_fix(shm))
    seconds = time.monotonic() - t0
    mib_s = LOADER_BATCHES * LOADER_BATCH_MIB / max(seconds, 1e-6)
    rep["metrics"]["dataloader_mib_per_s"] = round(mib_s, 1)
    intact = seen == [float(i) for i in range(LOADER_BATCHES)]
    return h.check(rep, "dataloader", intact,
                   f"{LOADER_WORKERS} workers, pin_memory={pin}: {LOADER_BATCHES} batches of "
                   f"{LOADER_BATCH_MIB} MiB{' in order' if intact else ' OUT OF ORDER'}, "
                   f"{mib_s:.0f} MiB/s ({where})", shm_mib=shm)


def check_round_trip(rep, how, size, model, fresh, forward):
    """The checkpoint check: `fresh`, loaded from `model`'s checkpoint of `size` bytes, holds
    equal tensors and `forward(m)` gives equal outputs (cuDNN deterministic: bit-equal)."""
    model.eval()
    fresh.eval()
    flags = torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True)
    with torch.no_grad(), flags:
        same_out = torch.equal(forward(model), forward(fresh))
    a, b = model.state_dict(), fresh.state_dict()
    same_params = a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rep["metrics"]["checkpoint_bytes"] = size
    h.check(rep, "checkpoint", same_params and same_out,
            f"{how}: {size} bytes, parameters {'equal' if same_params else 'DIFFER'}, "
            f"outputs {'equal' if same_out else 'DIFFER'}", bytes=size)


def check_mixed(rep, device, train):
    """The amp check of a framework's payload: `train(dtype)` trains under the framework's own
    mixed precision for `dtype` and returns (how, losses, dtypes a layer's outputs had); the
    loss must fall and the layer must have computed in `dtype`, not silently in float32."""
    dtype, why = mixed_dtype(device)
    if dtype is None:
        return h.skip(rep, "amp", why)
    how, losses, seen = train(dtype)
    rep["metrics"]["amp_dtype"] = dtype_name(dtype)
    return h.check_loss(rep, "amp", losses, f"{how}, layer outputs {', '.join(sorted(seen))}",
                        prefix="amp_", ok=dtype_name(dtype) in seen)


# ---------------------------------------------------------------------------------- training checks
def check_train(rep, device, data, steps, batch):
    torch.manual_seed(0)
    model = make_model().to(device)
    losses, times = train_loop(model, data, steps, batch, device)
    rep["metrics"].update(steps=steps, batch=batch)
    h.check_loss(rep, "train", losses, f"fp32 on {device.type}")
    return model, times


def _grad_scaler():
    try:
        return torch.amp.GradScaler("cuda")
    except (AttributeError, TypeError):  # torch < 2.3
        return torch.cuda.amp.GradScaler()


def check_amp(rep, device, data, steps, batch):
    """bf16 autocast (fp16 + GradScaler on GPUs without bf16); the loss must go down, and the
    model's output must have the autocast dtype (check_mixed): an autocast that silently ran
    in float32 fails."""
    def train(dtype):
        scaler = _grad_scaler() if dtype == torch.float16 else None
        torch.manual_seed(0)
        model = make_model().to(device)
        seen = output_dtypes(model[-1])
        losses, _ = train_loop(model, data, steps, batch, device, dtype, scaler)
        return (f"autocast {dtype_name(dtype)}{' + GradScaler' if scaler else ''}", losses,
                seen)
    return check_mixed(rep, device, train)


def check_checkpoint(rep, device, model, data):
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        path = os.path.join(tmp, "model.pt")
        torch.save(model.state_dict(), path)
        torch.manual_seed(1)  # other weights until the load
        fresh = make_model().to(device)
        try:
            state = torch.load(path, map_location=device, weights_only=True)
        except TypeError:  # torch < 1.13
            state = torch.load(path, map_location=device)
        fresh.load_state_dict(state)
        check_round_trip(rep, f"torch.save/torch.load in {tempfile.gettempdir()}",
                         os.path.getsize(path), model, fresh, lambda m: m(data[0][:32]))


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
            "gemm_dtype": dtype_name(dtype), "gemm_tflops": tflops, "gemm_gflops": tflops * 1000}
    rep["metrics"].update(vals)
    speed = f"{tflops:.1f} TFLOP/s" if cuda else f"{tflops * 1000:.1f} GFLOP/s"
    h.check(rep, "throughput", all(math.isfinite(v) and v > 0 for v in (step_s, tflops)),
            f"{batch / step_s:.0f} samples/s, {step_s * 1000:.2f} ms/step after {warm} warm-up; "
            f"{dtype_name(dtype)} GEMM {gemm_n}x{gemm_n}: {speed}", **vals)


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
        first, last, ratio, trained = h.loss_trend(
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
        return h.check(rep, "multi_gpu", False, f"not started: {max(left, 0):.0f} s left")
    cfg = {"budget": budget, "mb": 64 if opts.quick else 256, "iters": 3 if opts.quick else 10,
           "steps": min(max(opts.steps or 30, 10), 30), "batch": opts.batch}
    with socket.socket() as s:  # a free localhost port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = tmp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_mgpu_worker, args=(r, world, port, cfg, results), daemon=True)
             for r in range(world)]
    h.CHILDREN.extend(procs)
    h.log(rep["payload"], f"multi-GPU: {world} ranks, NCCL via 127.0.0.1:{port}, "
                          f"time limit {budget:.0f} s")
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
        return h.check(rep, "multi_gpu", False, why + (f": {errors}" if errors else ""))
    r = result
    h.check(rep, "multi_gpu_allreduce", r["allreduce_correct"],
            f"{world} GPUs, {cfg['mb']} MB float32 all-reduce "
            f"{'correct' if r['allreduce_correct'] else 'WRONG SUM'}; algbw "
            f"{r['algbw_gbps']:.1f} GB/s, busbw {r['busbw_gbps']:.1f} GB/s",
            algbw_gbps=r["algbw_gbps"], busbw_gbps=r["busbw_gbps"])
    return h.check(rep, "multi_gpu_ddp", r["ddp_ok"], f"DDP, {cfg['steps']} steps: "
                   + h.trend(r["ddp_loss_first"], r["ddp_loss_last"], r["ddp_loss_ratio"]),
                   loss_ratio=r["ddp_loss_ratio"])


# ---------------------------------------------------------------------------------- this payload
def _train_checks(rep, opts, device):
    steps, quick = h.train_steps(opts), opts.quick
    gemm_n = opts.gemm_size or ((4096 if quick else 8192) if device.type == "cuda" else 512)
    torch.manual_seed(0)
    data = make_data(data_size(opts), 0, device)
    batch = min(opts.batch, len(data[1]))
    model, times = guarded(rep, "train", check_train, device, data, steps, batch) or (None, None)
    on = model if model is not None else make_model().to(device)
    gpu_check(rep, "model_on_cuda", check_model_on_cuda, next(on.parameters()).device)
    guarded(rep, "amp", check_amp, device, data, steps, batch)
    if model is None:
        h.untrained(rep, "checkpoint")
        h.check(rep, "throughput", False, "no training step times (training failed)")
    else:
        guarded(rep, "checkpoint", check_checkpoint, device, model, data)
        guarded(rep, "throughput", check_throughput, device, times, batch, gemm_n, quick)


def _add_options(parser):
    parser.add_argument("--gemm-size", type=h.number(int, 16), default=None,
                        help="GEMM edge (default 8192 on GPU, 4096 with --quick, 512 on CPU)")


def over_torch(name, package, importer, train_checks, description):
    """The Payload of a framework built over torch (Lightning, Transformers, Accelerate), and
    its run(options): the framework is imported (a failure is a check, not a crash), its
    training checks `train_checks(framework, rep, ...)` run inside torch_run."""
    def run_into(rep, opts, deadline):
        fw = h.import_framework(rep, package, importer)
        torch_run(rep, opts, deadline, functools.partial(train_checks, fw) if fw else None)

    payload = h.Payload(name=name, description=description, run_into=run_into,
                        versions=(package, *VERSION_KEYS))
    return payload, lambda options: h.run(payload, options)


PAYLOAD = h.Payload(
    name="torch_smoke", description="Certify a PyTorch image by training in it.",
    run_into=lambda rep, opts, deadline: torch_run(rep, opts, deadline, _train_checks),
    versions=VERSION_KEYS, add_options=_add_options)


def build_parser():
    return h.build_parser(PAYLOAD)


def run(options):
    """Run every check and return the report; `options` is build_parser()'s Namespace or a dict."""
    return h.run(PAYLOAD, options)


def main(argv=None):
    return h.main(PAYLOAD, argv, script=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
