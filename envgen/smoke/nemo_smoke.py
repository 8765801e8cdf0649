#!/usr/bin/env python3
"""envgen smoke-training payload for NeMo speech images: NeMo's own EncDecCTCModel (a mel
preprocessor, a one-block ConvASR encoder, a CTC decoder over a character vocabulary) fit by
Lightning's Trainer on random audio, on one GPU where one was asked for. No tokenizer, no
pretrained model, no download: the model is built from its config.

Copied into images beside _harness.py and torch_smoke.py, run as
``python /opt/envgen/nemo_smoke.py [options]``; importable as envgen.smoke.nemo_smoke.
Imports the standard library, the harness, torch_smoke (the torch/CUDA checks), NeMo, the
Lightning its release states it needs and omegaconf (NeMo's models take a DictConfig).
Report and exit codes as torch_smoke's; "framework" in --expect is NeMo's version.
"""
import functools
import os
import sys
import tempfile

if __package__:  # imported as envgen.smoke.nemo_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import torch_smoke as ts
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import torch_smoke as ts

torch = ts.torch  # None where torch did not import: torch_checks reports that

RATE = 16000
SECONDS = 0.5
LABELS = [" ", "a", "b", "c", "d", "e", "f", "g", "h"]   # the character vocabulary
FEATURES = 32
FILTERS = 64


def _import_nemo():
    # offline: NeMo and the Hugging Face libraries it imports look nothing up
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import nemo
    import nemo.collections.asr  # noqa: F401 (nemo.collections.asr.models)
    return nemo


def _config():
    """The model's config: an omegaconf DictConfig, as NeMo's models take it (a dict is refused)."""
    from omegaconf import OmegaConf
    return OmegaConf.create({
        "sample_rate": RATE, "labels": LABELS,
        "preprocessor": {"_target_": "nemo.collections.asr.modules."
                                     "AudioToMelSpectrogramPreprocessor",
                         "sample_rate": RATE, "features": FEATURES, "n_fft": 512,
                         "window_size": 0.02, "window_stride": 0.01, "dither": 0.0,
                         "pad_to": 0, "normalize": "per_feature"},
        "encoder": {"_target_": "nemo.collections.asr.modules.ConvASREncoder",
                    "feat_in": FEATURES, "activation": "relu", "conv_mask": True,
                    "jasper": [{"filters": FILTERS, "repeat": 1, "kernel": [11],
                                "stride": [1], "dilation": [1], "dropout": 0.0,
                                "residual": False, "separable": False}]},
        "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoder",
                    "feat_in": FILTERS, "num_classes": len(LABELS), "vocabulary": LABELS},
        "optim": {"name": "adam", "lr": 3e-3}})


def _data(opts):
    """Random audio and random transcripts (a fixed set, so the model can fit it), batched as
    NeMo's audio-to-text datasets batch: signal, its length, tokens, their length."""
    g = torch.Generator().manual_seed(0)
    n, length = max(opts.batch, 4), int(RATE * SECONDS)
    audio = torch.randn(n, length, generator=g) * 0.1
    audio_len = torch.full((n,), length, dtype=torch.long)
    tokens = torch.randint(1, len(LABELS) - 1, (n, 6), generator=g)
    tokens_len = torch.full((n,), 6, dtype=torch.long)
    data = torch.utils.data.TensorDataset(audio, audio_len, tokens, tokens_len)
    return torch.utils.data.DataLoader(data, batch_size=opts.batch), audio[:2], audio_len[:2]


def _fit(nemo, opts, device, loader, precision):
    """A fresh EncDecCTCModel fit for --steps; (model, trainer, losses, dtypes of the decoder's
    outputs, the device its parameters were on while training)."""
    import lightning.pytorch as pl
    from lightning.pytorch.plugins.environments import LightningEnvironment
    from nemo.collections.asr.models import EncDecCTCModel

    seen_losses, where = [], []

    class Losses(pl.Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            loss = outputs["loss"] if isinstance(outputs, dict) else outputs
            seen_losses.append(float(loss.detach().float()))
            where.append(next(module.parameters()).device)

    torch.manual_seed(0)
    model = EncDecCTCModel(cfg=_config())
    model.setup_optimization(model.cfg.optim)
    seen = ts.output_dtypes(model.decoder.decoder_layers[0])
    # "gpu", not "auto": where a GPU is used, Lightning must fail rather than fall back. The
    # cluster environment is named, so Lightning does not probe MPI (MPI_Init aborts the
    # process in a container with no network).
    trainer = pl.Trainer(accelerator="gpu" if device.type == "cuda" else "cpu", devices=1,
                         precision=precision, max_steps=h.train_steps(opts), logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[Losses()],
                         plugins=[LightningEnvironment()])
    trainer.fit(model, train_dataloaders=loader)
    return model, trainer, seen_losses, seen, (where[-1] if where else None)


def check_train(rep, nemo, opts, device, loader):
    model, trainer, losses, _, where = _fit(nemo, opts, device, loader, "32-true")
    rep["metrics"].update(steps=trainer.global_step, batch=opts.batch)
    h.check_loss(rep, "train", losses,
                 f"EncDecCTCModel (ConvASR, {len(LABELS)} characters), lightning Trainer, "
                 f"{trainer.accelerator.__class__.__name__}, 32-true")
    return model, where


def _train_mixed(nemo, opts, device, loader, dtype):
    precision = "bf16-mixed" if dtype == torch.bfloat16 else "16-mixed"
    _, _, losses, seen, _ = _fit(nemo, opts, device, loader, precision)
    return f"Trainer(precision={precision!r})", losses, seen


def check_checkpoint(rep, model, device, audio, audio_len):
    from nemo.collections.asr.models import EncDecCTCModel
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        path = os.path.join(tmp, "model.nemo")
        model.save_to(path)
        torch.manual_seed(1)  # other weights until the restore
        fresh = EncDecCTCModel.restore_from(path, map_location=device)
        ts.check_round_trip(rep, "EncDecCTCModel.save_to, restore_from (.nemo)",
                            os.path.getsize(path), model.to(device), fresh.to(device),
                            lambda m: m(input_signal=audio.to(device),
                                        input_signal_length=audio_len.to(device))[0])


def _train_checks(nemo, rep, opts, device):
    loader, audio, audio_len = _data(opts)
    trained = ts.guarded(rep, "train", check_train, nemo, opts, device, loader)
    if trained is None:
        h.untrained(rep, "model_on_cuda", "checkpoint")
    else:
        model, where = trained
        ts.gpu_check(rep, "model_on_cuda", ts.check_model_on_cuda, where,
                     "EncDecCTCModel parameters in training_step")
        ts.guarded(rep, "checkpoint", check_checkpoint, model, device, audio, audio_len)
    ts.guarded(rep, "amp", ts.check_mixed, device,
               functools.partial(_train_mixed, nemo, opts, device, loader))


PAYLOAD, run = ts.over_torch("nemo_smoke", "nemo", _import_nemo, _train_checks,
                             "Certify a NeMo speech image by training a CTC model.")


def main(argv=None):
    return h.main(PAYLOAD, argv, script=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
