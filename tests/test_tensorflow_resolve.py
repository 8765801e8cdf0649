"""TensorFlow's stacks resolve through the same code as every framework: names, specs, and bad
input as one sentence, exit 2 and the nearest specs that work."""
from __future__ import annotations

import json

import pytest

from envgen.cli import main
from envgen.core.errors import Unsatisfiable
from envgen.matrix import load_matrix
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

M = load_matrix()


def res(spec: str, **host):
    return resolve(M, parse_spec(spec, M), host_from_flags(M, **host))


def refused(spec: str, **host) -> Unsatisfiable:
    with pytest.raises(Unsatisfiable) as e:
        res(spec, **host)
    return e.value


def test_tensorflow_cu125_pins_the_tested_cudnn_not_the_newest_cu12():
    st = res("tensorflow-cu125")
    pins = dict(st.packages)
    assert (st.cuda, st.cudnn) == ("12.5", "9.3.0.75") and pins["nvidia-cudnn-cu12"] == "9.3.0.75"
    assert pins["tensorflow"] == st.version and "keras" in pins
    assert all(v[:1].isdigit() for n, v in pins.items())   # exact versions only
    assert st.driver_minimum == "525.60.13" and st.driver_toolkit   # from cuda.yaml rows
    assert any("inferred" in r and "tested build table" in r for r in st.reasons)


def test_an_exact_release_gets_the_pins_its_wheel_states():
    st = res("tensorflow==2.19.1")
    assert (st.stack, st.version, st.nccl) == ("tensorflow-cu125", "2.19.1", "2.23.4")


def test_tensorflow_cpu_installs_the_cpu_wheel_and_no_tensorflow():
    st = res("tensorflow-cpu")
    pins = dict(st.packages)
    assert "tensorflow" not in pins and pins["tensorflow-cpu"] == st.version
    assert st.cuda is None and not any(n.startswith("nvidia-") for n in pins)


def test_a_release_that_does_not_exist_names_the_newest(capsys):
    assert main(["resolve", "tensorflow==2.99"]) == 2
    err = capsys.readouterr().err
    assert "tensorflow==2.99 is not a release in the matrix" in err
    assert "try: tensorflow==2.21.0" in err


def test_a_python_without_wheels_is_refused_with_hints():
    e = refused("tensorflow,python=3.14")
    assert "no base offers Python 3.14" in e.message and e.hints


def test_cuda_13_is_refused_naming_the_builds_there_are():
    e = refused("tensorflow-cu130")
    assert "no tensorflow release in the matrix has a cu130 build" in e.message
    assert "tensorflow-cu125" in e.hints and "tensorflow-cpu" in e.hints


def test_a_driver_below_the_cuda_12_floor_gets_the_newest_cuda_11_release():
    # 2.14 is the last release whose wheel pins CUDA 11.8 (its and-cuda extra)
    st = res("tensorflow", driver="520.61.05")
    assert (st.stack, st.version, st.cuda) == ("tensorflow-cu118", "2.14.1", "11.8")


def test_a_driver_below_every_cuda_floor_is_refused_and_offers_the_cpu_build():
    e = refused("tensorflow", driver="440.33.01")
    assert "older than 525.60.13" in e.message
    assert list(e.hints) == ["tensorflow==2.21.0,variant=cpu"]


def test_h100_on_a_minor_version_driver_needs_sass_for_9_0():
    """TensorFlow 2.15's wheel carries SASS up to 8.0 and PTX 8.0 (read from the wheel:
    envgen/refresh/wheel_archs.yaml), and PTX does not JIT under minor-version
    compatibility: on R525 the H100 cannot run CUDA 12.2's 2.15, on R535 (12.2's own
    driver) it can. 2.16 on carry SASS 9.0, so the newest release runs on R535 too."""
    with pytest.raises(Unsatisfiable) as e:
        res("tensorflow-cu122", driver="525.60.13", gpu="H100")
    assert "only PTX 8.0, and PTX JIT fails under minor-version compatibility" in \
        e.value.message
    assert res("tensorflow-cu122", driver="535.104.05", gpu="H100").cuda == "12.2"
    st = res("tensorflow", driver="535.104.05", gpu="H100")
    assert (st.stack, st.cuda) == ("tensorflow-cu125", "12.5")


def test_torch_and_tensorflow_in_one_spec_are_refused_naming_both_pins(capsys):
    assert main(["resolve", "torch==2.4.1,tensorflow", "--json"]) == 2
    err = json.loads(capsys.readouterr().out)
    assert "each bring their own CUDA libraries" in err["message"]
    assert "nvidia-cublas-cu12==12.1.3.1 (torch 2.4.1) vs nvidia-cublas-cu12==12.5.3.2 " \
           "(tensorflow 2.21.0)" in err["message"]
    assert err["hints"] == ["pytorch-cu121", "tensorflow-cu125"]
