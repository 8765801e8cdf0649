#!/usr/bin/env python3
"""envgen smoke-training payload for Hugging Face Accelerate images: a plain training loop with
Accelerator.prepare and Accelerator.backward, on the GPU where one was asked for.

Copied into images beside _harness.py and torch_smoke.py, run as
``python /opt/envgen/accelerate_smoke.py [options]``; importable as envgen.smoke.accelerate_smoke.
Imports the standard library, the harness, torch_smoke (the torch/CUDA checks) and accelerate.
Report and exit codes as torch_smoke's; "framework" in --expect is accelerate's version.
"""
import functools
import itertools
import sys
import tempfile

if __package__:  # imported as envgen.smoke.accelerate_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import torch_smoke as ts
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import torch_smoke as ts

torch, F = ts.torch, ts.F  # None where torch did not import: torch_checks reports that


def _import_accelerate():
    import accelerate
    import accelerate.state
    return accelerate


def _accelerator(acc, device, mixed):
    # Accelerate allows one mixed precision per process (another one in a second Accelerator
    # raises); this payload trains in float32, then mixed, so it clears the shared state first,
    # as accelerate's own tests do between cases. Before 0.17 there is no PartialState and
    # _reset_state takes no argument (0.16.0 raised TypeError on it).
    try:
        acc.state.AcceleratorState._reset_state(reset_partial_state=True)
    except TypeError:
        acc.state.AcceleratorState._reset_state()
    return acc.Accelerator(mixed_precision=mixed, cpu=device.type != "cuda")


def _prepared(acc, opts, device, mixed):
    """(accelerator, model, optimizer, loader) after prepare, and the model's last layer's
    output dtypes."""
    accelerator = _accelerator(acc, device, mixed)
    torch.manual_seed(0)
    model = ts.make_model()
    seen = ts.output_dtypes(model[-1])
    data = torch.utils.data.TensorDataset(*ts.make_data(ts.data_size(opts), 0,
                                                        torch.device("cpu")))
    loader = torch.utils.data.DataLoader(data, batch_size=opts.batch)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return (accelerator, *accelerator.prepare(model, optimizer, loader)), seen


def _fit(acc, opts, device, mixed):
    """Train a fresh model for --steps; ((accelerator, model), losses, output dtypes)."""
    (accelerator, model, optimizer, loader), seen = _prepared(acc, opts, device, mixed)
    losses = []
    model.train()
    epochs = itertools.chain.from_iterable(itertools.repeat(loader))
    for x, y in itertools.islice(epochs, h.train_steps(opts)):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        losses.append(float(loss.detach().float()))
    return (accelerator, model), losses, seen


def check_train(rep, acc, opts, device):
    trained, losses, _ = _fit(acc, opts, device, "no")
    rep["metrics"].update(steps=len(losses), batch=opts.batch)
    h.check_loss(rep, "train", losses, f"Accelerator(mixed_precision='no') on {trained[0].device}")
    return trained


def _train_mixed(acc, opts, device, dtype):
    mixed = "bf16" if dtype == torch.bfloat16 else "fp16"
    _, losses, seen = _fit(acc, opts, device, mixed)
    return f"Accelerator(mixed_precision={mixed!r})", losses, seen


def check_on_cuda(rep, accelerator, model):
    param = next(model.parameters()).device
    h.check(rep, "model_on_cuda", accelerator.device.type == "cuda" and param.type == "cuda",
            f"accelerator.device {accelerator.device}, parameters after prepare on {param}")


def check_checkpoint(rep, acc, opts, device, accelerator, model):
    x = ts.make_data(32, 1, device)[0]
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        accelerator.save_state(tmp)
        torch.manual_seed(1)  # other weights until the load
        (fresh_accelerator, fresh, *_), _ = _prepared(acc, opts, device, "no")
        fresh_accelerator.load_state(tmp)
        ts.check_round_trip(rep, "Accelerator.save_state, load_state", h.folder_bytes(tmp),
                            accelerator.unwrap_model(model), fresh_accelerator.unwrap_model(fresh),
                            lambda m: m(x))


def _train_checks(acc, rep, opts, device):
    trained = ts.guarded(rep, "train", check_train, acc, opts, device)
    if trained is None:
        h.untrained(rep, "model_on_cuda", "checkpoint")
    else:
        ts.gpu_check(rep, "model_on_cuda", check_on_cuda, *trained)
        ts.guarded(rep, "checkpoint", check_checkpoint, acc, opts, device, *trained)
    ts.guarded(rep, "amp", ts.check_mixed, device,
               functools.partial(_train_mixed, acc, opts, device))


PAYLOAD, run = ts.over_torch("accelerate_smoke", "accelerate", _import_accelerate, _train_checks,
                             "Certify a Hugging Face Accelerate image by training.")


def main(argv=None):
    return h.main(PAYLOAD, argv, script=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
