#!/usr/bin/env python3
"""envgen smoke-training payload for Lightning images: a LightningModule fit by Lightning's
Trainer, on one GPU where one was asked for.

Copied into images beside _harness.py and torch_smoke.py, run as
``python /opt/envgen/lightning_smoke.py [options]``; importable as envgen.smoke.lightning_smoke.
Imports the standard library, the harness, torch_smoke (the torch/CUDA checks) and Lightning.
Report and exit codes as torch_smoke's; "framework" in --expect is Lightning's version.
"""
import functools
import importlib.util
import os
import sys
import tempfile

if __package__:  # imported as envgen.smoke.lightning_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import torch_smoke as ts
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import torch_smoke as ts

torch, F = ts.torch, ts.F  # None where torch did not import: torch_checks reports that


def _import_lightning():
    """lightning.pytorch, or pytorch_lightning where the `lightning` package is absent; never
    both, as a module of one namespace is no LightningModule to the other's Trainer."""
    if importlib.util.find_spec("lightning") is not None:
        import lightning.pytorch as pl
        import lightning.pytorch.plugins.environments  # noqa: F401 (pl.plugins.environments)
    else:
        import pytorch_lightning as pl
        import pytorch_lightning.plugins.environments  # noqa: F401
    return pl


def _module_class(pl):
    class SmokeModule(pl.LightningModule):
        """torch_smoke's classifier and Adam. Records its losses, and where its parameters were
        while training: the Trainer moves them back to the CPU when fit ends."""

        def __init__(self, lr=3e-3):
            super().__init__()
            self.save_hyperparameters()
            self.net = ts.make_model()
            self.losses, self.train_device = [], None

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.cross_entropy(self(x), y)
            self.losses.append(float(loss.detach().float()))
            self.train_device = next(self.parameters()).device
            return loss

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)

    return SmokeModule


def _fit(pl, cls, opts, device, loader, precision):
    """A fresh module fit for --steps; (module, trainer, dtypes of its last layer's outputs)."""
    torch.manual_seed(0)
    module = cls()
    seen = ts.output_dtypes(module.net[-1])
    # "gpu", not "auto": where a GPU is used, Lightning must fail rather than fall back.
    # One process on one device: naming the cluster environment skips Lightning's
    # detection of SLURM, MPI and the rest. MPI's probe imports mpi4py, and MPI_Init
    # aborts the whole process in a container with no network.
    trainer = pl.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1,
                         precision=precision, max_steps=h.train_steps(opts), logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False,
                         plugins=[pl.plugins.environments.LightningEnvironment()])
    trainer.fit(module, loader)
    return module, trainer, seen


def check_train(rep, pl, cls, opts, device, loader):
    module, trainer, _ = _fit(pl, cls, opts, device, loader, "32-true")
    rep["metrics"].update(steps=trainer.global_step, batch=opts.batch)
    h.check_loss(rep, "train", module.losses,
                 f"{pl.__name__}.Trainer, {trainer.accelerator.__class__.__name__}, 32-true")
    return module, trainer


def _train_mixed(pl, cls, opts, device, loader, dtype):
    precision = "bf16-mixed" if dtype == torch.bfloat16 else "16-mixed"
    module, _, seen = _fit(pl, cls, opts, device, loader, precision)
    return f"Trainer(precision={precision!r})", module.losses, seen


def check_checkpoint(rep, cls, trainer, module, device, x):
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        path = os.path.join(tmp, "model.ckpt")
        trainer.save_checkpoint(path)
        torch.manual_seed(1)  # other weights until the load
        fresh = cls.load_from_checkpoint(path, map_location=device)
        ts.check_round_trip(rep, "Trainer.save_checkpoint, load_from_checkpoint",
                            os.path.getsize(path), module.to(device), fresh.to(device),
                            lambda m: m(x.to(device)))


def _train_checks(pl, rep, opts, device):
    cls = _module_class(pl)
    x, y = ts.make_data(ts.data_size(opts), 0, torch.device("cpu"))  # the Trainer moves batches
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                         batch_size=opts.batch)
    trained = ts.guarded(rep, "train", check_train, pl, cls, opts, device, loader)
    if trained is None:
        h.untrained(rep, "model_on_cuda", "checkpoint")
    else:
        module, trainer = trained
        ts.gpu_check(rep, "model_on_cuda", ts.check_model_on_cuda, module.train_device,
                     "LightningModule parameters in training_step")
        ts.guarded(rep, "checkpoint", check_checkpoint, cls, trainer, module, device, x[:32])
    ts.guarded(rep, "amp", ts.check_mixed, device,
               functools.partial(_train_mixed, pl, cls, opts, device, loader))


PAYLOAD, run = ts.over_torch("lightning_smoke", "lightning", _import_lightning, _train_checks,
                             "Certify a Lightning image by training.")


def main(argv=None):
    return h.main(PAYLOAD, argv, script=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
