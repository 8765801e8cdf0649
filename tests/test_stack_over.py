"""A stack built over another: its JSON form (label, lock) round-trips, is validated like
every lock value, and projects back onto the stack it is built over."""
from __future__ import annotations

import pytest

from envgen.core.model import Stack
from envgen.matrix import load_matrix
from envgen.matrix.wire import stack_problems
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import Host, resolve

M = load_matrix()


def res(text: str) -> Stack:
    return resolve(M, parse_spec(text, M), Host())


def test_the_json_form_round_trips_and_validates():
    st = res("accelerate-cu121")
    data = st.to_json()
    assert data["framework"]["builds_on"] == {"name": "pytorch", "package": "torch"}
    assert data["framework"]["addons"] == ["accelerate"]
    assert stack_problems(data) == []
    back = Stack.from_json(data)
    assert back.builds_on == "pytorch" and back.addons == ("accelerate",)
    assert back.to_json() == data


@pytest.mark.parametrize("bad", [{"name": "x;rm -rf /", "package": "torch"}, "pytorch",
                                 {"name": "pytorch"}, ["pytorch"]])
def test_a_hostile_builds_on_in_a_lock_is_refused(bad):
    data = res("lightning-cu128").to_json()
    data["framework"]["builds_on"] = bad
    assert any("builds_on" in p for p in stack_problems(data))


def test_the_base_stack_is_the_pytorch_stack_it_is_built_over():
    over, plain = res("lightning-cu128"), res("torch==2.10.0,variant=cu128")
    base = over.base_stack()
    assert base.stack == "pytorch-cu128" and base.version == plain.version
    assert dict(base.packages) == dict(plain.packages)
    assert "lightning" not in dict(base.packages)


def test_transformers_brings_the_accelerate_its_trainer_needs():
    st = res("transformers-cu128")
    assert "accelerate" in st.addons
    assert dict(st.packages)["accelerate"].startswith(">=")   # the closure pins it exactly
    both = res("transformers,accelerate")
    assert dict(both.packages)["accelerate"][0].isdigit()       # chosen, exact


def test_two_frameworks_with_cuda_of_their_own_are_refused_naming_both_pins(capsys):
    from envgen.cli import main
    assert main(["resolve", "jax==0.6.2,torch==2.7.1"]) == 2
    err = capsys.readouterr().err
    # each resolved alone, compared on the CUDA major they share, pins named on both sides
    assert "nvidia-cublas-cu12==12.9.2.10 (jax 0.6.2) vs nvidia-cublas-cu12==12.6.4.1 " \
           "(torch 2.7.1)" in err
    assert "try: jax-cuda12" in err and "try: pytorch-cu126" in err
    assert main(["resolve", "torch==2.4.1,jax"]) == 2
    err = capsys.readouterr().err
    assert "Python 3.11 (pytorch-cu121) vs 3.13 (jax-cuda12)" in err
    assert main(["resolve", "jax==0.6.2,torch==9.9"]) == 2
    # a release the matrix does not hold is named before any resolving, with the nearest
    assert "torch==9.9 is not a release in the matrix" in capsys.readouterr().err
