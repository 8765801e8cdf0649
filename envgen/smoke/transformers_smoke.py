#!/usr/bin/env python3
"""envgen smoke-training payload for Hugging Face Transformers images: a tiny GPT-2 built from
a config (nothing downloaded) trained by transformers' Trainer, on the GPU where one was asked for.

Copied into images beside _harness.py and torch_smoke.py, run as
``python /opt/envgen/transformers_smoke.py [options]``; importable as
envgen.smoke.transformers_smoke. Imports the standard library, the harness, torch_smoke (the
torch/CUDA checks) and transformers. Report and exit codes as torch_smoke's; "framework" in
--expect is transformers' version.
"""
import dataclasses
import functools
import os
import sys
import tempfile

if __package__:  # imported as envgen.smoke.transformers_smoke
    from envgen.smoke import _harness as h
    from envgen.smoke import torch_smoke as ts
else:  # a script in /opt/envgen: its folder is first on sys.path
    import _harness as h
    import torch_smoke as ts

torch = ts.torch  # None where torch did not import: torch_checks reports that
VOCAB, SEQ, LR = 64, 16, 1e-2
# TrainingArguments options renamed within the releases envgen installs: 4.40 has only
# evaluation_strategy (later ones eval_strategy, and 5.x dropped the old name, as it dropped
# no_cuda, which releases before 4.34 had instead of use_cpu). Each option goes under the name
# this release knows.
OLD_NAMES = {"eval_strategy": "evaluation_strategy", "use_cpu": "no_cuda"}


def _import_transformers():
    # Offline before the import (the Hub client reads these once): a smoke run never downloads.
    os.environ.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    import transformers
    return transformers


def _training_args(tf, **options):
    known = {f.name for f in dataclasses.fields(tf.TrainingArguments)}
    return tf.TrainingArguments(**{k if k in known else OLD_NAMES.get(k, k): v
                                   for k, v in options.items()})


def make_tokens(n, seed):
    """Sequences counting up (mod VOCAB) from random starts: each token follows from the one
    before, so a model can push the loss far below log(VOCAB)."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(0, VOCAB, (n, 1), generator=gen) + torch.arange(SEQ)) % VOCAB


def _train(tf, opts, device, ids, **precision):
    """A fresh 2-layer GPT-2 trained for --steps; (trainer, losses, dtypes of its LM head's
    outputs). Trainer spreads over every visible GPU (DataParallel), as it does unlaunched."""
    torch.manual_seed(0)
    config = tf.GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=64, n_layer=2, n_head=2,
                           bos_token_id=0, eos_token_id=0)  # GPT-2's own ids lie outside VOCAB
    model = tf.GPT2LMHeadModel(config)
    seen = ts.output_dtypes(model.lm_head)
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        args = _training_args(
            tf, output_dir=tmp, max_steps=h.train_steps(opts), learning_rate=LR,
            per_device_train_batch_size=opts.batch, lr_scheduler_type="constant",
            logging_steps=1, report_to="none", save_strategy="no", eval_strategy="no",
            disable_tqdm=True, use_cpu=device.type != "cuda", seed=0, **precision)
        trainer = tf.Trainer(model=model, args=args,
                             train_dataset=[{"input_ids": row, "labels": row} for row in ids])
        trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    return trainer, losses, seen


def check_train(rep, tf, opts, device, ids):
    trainer, losses, _ = _train(tf, opts, device, ids)
    rep["metrics"].update(steps=trainer.state.global_step, batch=opts.batch)
    h.check_loss(rep, "train", losses, f"Trainer, GPT-2 fp32 on {trainer.args.device}, "
                                       f"{trainer.args.n_gpu} GPU(s)")
    return trainer.model


def _train_mixed(tf, opts, device, ids, dtype):
    flag = "bf16" if dtype == torch.bfloat16 else "fp16"
    _, losses, seen = _train(tf, opts, device, ids, **{flag: True})
    return f"TrainingArguments({flag}=True)", losses, seen


def check_checkpoint(rep, tf, model, device, ids):
    with tempfile.TemporaryDirectory(prefix="envgen-smoke-") as tmp:
        model.save_pretrained(tmp)
        fresh = tf.GPT2LMHeadModel.from_pretrained(tmp).to(device)
        ts.check_round_trip(rep, "save_pretrained, from_pretrained", h.folder_bytes(tmp),
                            model, fresh, lambda m: m(ids.to(device)).logits)


def _train_checks(tf, rep, opts, device):
    ids = make_tokens(ts.data_size(opts), 0)
    model = ts.guarded(rep, "train", check_train, tf, opts, device, ids)
    if model is None:
        h.untrained(rep, "model_on_cuda", "checkpoint")
    else:
        ts.gpu_check(rep, "model_on_cuda", ts.check_model_on_cuda,
                     next(model.parameters()).device, "GPT-2 parameters after Trainer.train")
        ts.guarded(rep, "checkpoint", check_checkpoint, tf, model, device, ids[:32])
    ts.guarded(rep, "amp", ts.check_mixed, device,
               functools.partial(_train_mixed, tf, opts, device, ids))


PAYLOAD, run = ts.over_torch("transformers_smoke", "transformers", _import_transformers,
                             _train_checks,
                             "Certify a Hugging Face Transformers image by training.")


def main(argv=None):
    return h.main(PAYLOAD, argv, script=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
