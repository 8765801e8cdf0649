#!/usr/bin/env python3
"""envgen smoke-training payload for DeepSpeed images: ZeRO stage 2 over a plain torch AdamW
(no compiled op: FusedAdam and CPUAdam need a compiler the image does not carry), in one
process, on the GPU where one was asked for.

Copied into images beside _harness.py and torch_smoke.py, run as
``python /opt/envgen/deepspeed_smoke.py [options]``; importable as envgen.smoke.deepspeed_smoke.
Imports the standard library, the harness, torch_smoke (the torch/CUDA checks) and deepspeed.
Report and exit codes as torch_smoke's; "framework" in --expect is deepspeed's version.
"""
import functools
import os
import socket
import sys
import tempfile

if __package__:  # imported as envgen.smoke.deepspeed_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import torch_smoke as ts
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import torch_smoke as ts

torch, F = ts.torch, ts.F  # None where torch did not import: torch_checks reports that

ZERO_STAGE = 2


def single_process_env():
    """The variables deepspeed.init_distributed reads, for a world of one on the loopback
    interface (a container under test has no other network); a free port, so two payloads
    on one host do not collide. Values already set are kept."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    for key, value in env.items():
        os.environ.setdefault(key, value)


# DeepSpeed's CPU accelerator compiles its shared-memory all-reduce op just in time when its
# communication backend starts, and an image carries no compiler. One process reduces
# nothing, so on the CPU the op is marked unavailable (DeepSpeed keeps this dict for such
# edits) and torch.distributed's gloo is used; on CUDA nothing is changed.
CPU_ONLY_OPS = ("deepspeed_shm_comm",)


def _import_deepspeed():
    single_process_env()
    import deepspeed
    from deepspeed.accelerator import get_accelerator
    if get_accelerator().device_name() == "cpu":
        for name in CPU_ONLY_OPS:
            deepspeed.ops.__compatible_ops__[name] = False
    return deepspeed


def config(opts, mixed):
    """ZeRO-2 with the client's optimizer; `mixed` is 'bf16', 'fp16' or None."""
    cfg = {"train_micro_batch_size_per_gpu": opts.batch, "gradient_accumulation_steps": 1,
           "zero_optimization": {"stage": ZERO_STAGE},
           "zero_allow_untested_optimizer": True,   # a torch optimizer, not DeepSpeed's own
           "steps_per_print": 10 ** 9, "wall_clock_breakdown": False}
    if mixed == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif mixed == "fp16":
        cfg["fp16"] = {"enabled": True, "initial_scale_power": 8}
    return cfg


def _engine(ds, opts, mixed, seed=0):
    """(engine, optimizer, the last layer's output dtypes) of a fresh model under ZeRO-2."""
    torch.manual_seed(seed)
    model = ts.make_model()
    seen = ts.output_dtypes(model[-1])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    engine, zero_opt, _, _ = ds.initialize(model=model, optimizer=optimizer,
                                           config=config(opts, mixed))
    return engine, zero_opt, seen


def _dtype_of(engine):
    return next(engine.module.parameters()).dtype


def _fit(ds, opts, device, mixed):
    """Train for --steps; (engine, ZeRO optimizer, losses, output dtypes)."""
    engine, zero_opt, seen = _engine(ds, opts, mixed)
    x, y = ts.make_data(ts.data_size(opts), 0, engine.device)
    x = x.to(_dtype_of(engine))
    b = min(opts.batch, x.shape[0])
    losses = []
    engine.train()
    for step in range(h.train_steps(opts)):
        lo = (step * b) % (x.shape[0] - b + 1)
        loss = F.cross_entropy(engine(x[lo:lo + b]).float(), y[lo:lo + b])
        engine.backward(loss)
        engine.step()
        losses.append(float(loss.detach().float()))
    return engine, zero_opt, losses, seen


def check_train(rep, ds, opts, device):
    engine, zero_opt, losses, _ = _fit(ds, opts, device, None)
    stage = engine.zero_optimization_stage()
    rep["metrics"].update(steps=len(losses), batch=opts.batch, zero_stage=stage,
                          zero_optimizer=type(zero_opt).__name__)
    h.check_loss(rep, "train", losses,
                 f"deepspeed.initialize, ZeRO stage {stage} ({type(zero_opt).__name__} over "
                 f"torch.optim.AdamW), on {engine.device}", ok=stage == ZERO_STAGE)
    return engine


def _train_mixed(ds, opts, device, dtype):
    mixed = "bf16" if dtype == torch.bfloat16 else "fp16"
    _, _, losses, seen = _fit(ds, opts, device, mixed)
    return f"DeepSpeed config {mixed}.enabled", losses, seen


def check_on_cuda(rep, engine):
    param = next(engine.module.parameters()).device
    h.check(rep, "model_on_cuda", engine.device.type == "cuda" and param.type == "cuda",
            f"engine.device {engine.device}, parameters on {param}")


def check_checkpoint(rep, ds, opts, device, engine):
    x = ts.make_data(32, 1, engine.device)[0]
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        engine.save_checkpoint(tmp, tag="smoke")
        fresh, _, _ = _engine(ds, opts, None, seed=1)   # other weights until the load
        path, _ = fresh.load_checkpoint(tmp, tag="smoke")
        ts.check_round_trip(rep, f"engine.save_checkpoint, load_checkpoint "
                            f"({'loaded' if path else 'NOT loaded'})", h.folder_bytes(tmp),
                            engine.module, fresh.module, lambda m: m(x))


def _built_for(ds):
    """The accelerator DeepSpeed was built for and the one it runs on: a CUDA image built on a
    machine without a GPU records 'cpu' and still runs on CUDA (its ops are not precompiled)."""
    try:
        from deepspeed import git_version_info as info
        from deepspeed.accelerator import get_accelerator
        return {"built_for": getattr(info, "accelerator_name", "") or None,
                "runs_on": get_accelerator().device_name(),
                "ops_installed": sorted(k for k, v in info.installed_ops.items() if v)}
    except Exception as exc:  # noqa: BLE001 (a report, never a crash)
        return {"error": f"{type(exc).__name__}: {exc}"}


def gloo_bf16_refusal(dist, dtype):
    """Why ZeRO cannot reduce `dtype` gradients in this process, or None: on the CPU they go
    through torch.distributed's gloo, and torch 2.0's gloo refuses bfloat16 ("Invalid scalar
    type"); on a GPU they go through NCCL, which has it."""
    if not (dist.is_available() and dist.is_initialized()) or \
            dist.get_backend() != "gloo" or dtype != torch.bfloat16:
        return None
    try:
        dist.all_reduce(torch.ones(1, dtype=dtype))
    except RuntimeError as exc:
        return (f"torch {torch.__version__}'s gloo cannot all-reduce bfloat16 ({exc}), and "
                f"ZeRO reduces gradients through it on the CPU: mixed precision is checked at "
                f"level cuda, over NCCL")
    return None


def _check_mixed(rep, ds, opts, device):
    dtype, _ = ts.mixed_dtype(device)
    why = gloo_bf16_refusal(torch.distributed, dtype) if device.type != "cuda" else None
    if why:
        return h.skip(rep, "amp", why)
    return ts.check_mixed(rep, device, functools.partial(_train_mixed, ds, opts, device))


def _train_checks(ds, rep, opts, device):
    rep["metrics"]["deepspeed_accelerator"] = _built_for(ds)
    engine = ts.guarded(rep, "train", check_train, ds, opts, device)
    if engine is None:
        h.untrained(rep, "model_on_cuda", "checkpoint")
    else:
        ts.gpu_check(rep, "model_on_cuda", check_on_cuda, engine)
        ts.guarded(rep, "checkpoint", check_checkpoint, ds, opts, device, engine)
    ts.guarded(rep, "amp", _check_mixed, ds, opts, device)


PAYLOAD, run = ts.over_torch("deepspeed_smoke", "deepspeed", _import_deepspeed, _train_checks,
                             "Certify a DeepSpeed image by training with ZeRO stage 2.")


def main(argv=None):
    return h.main(PAYLOAD, argv, script=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
