"""linux/arm64 as a platform of a stack (issue 29): the Stack's platform in its JSON form
(absent for linux/amd64, so old labels, locks and certificates read as amd64), the spec key,
--platform and the -arm64 name, the Grace GPUs that imply it, Jetson refused, a variant with
no aarch64 wheel refused with the nearest that has one, the bundled aarch64 closure (every
file aarch64 or pure, each hashed), the rendered base recipe and build for arm64, and the
certificate saying the run was emulated."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

from envgen.core import record
from envgen.core.errors import InputError, Unsatisfiable
from envgen.matrix import load_matrix
from envgen.matrix.wire import stack_problems
from envgen.resolve.spec import parse_spec
from envgen.resolve.stack import host_from_flags, resolve

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def res(m, spec, **host):
    return resolve(m, parse_spec(spec, m), host_from_flags(m, **host))


@pytest.fixture(scope="module")
def arm(m):
    return res(m, "pytorch-cpu-arm64")


def test_an_arm64_cpu_stack_installs_pypis_aarch64_cpu_wheel_on_an_arm64_base(arm):
    assert arm.stack == "pytorch-cpu-arm64" and arm.platform == "linux/arm64"
    assert dict(arm.packages)["torch"] == "2.10.0"   # the newest whose aarch64 wheel is CPU
    assert arm.wheel_source == "pypi" and arm.index_url is None
    assert arm.base.arch == "arm64" and arm.base.platform == "manylinux_2_36_aarch64"
    assert "arm64" in arm.base.local_tag
    assert any("pypi:torch/torch-2.10.0-" in r and "aarch64" in r for r in arm.reasons)


def test_the_platform_spec_key_and_flag_name_the_same_stack(m, arm):
    same = arm.replace(reasons=())   # the reasons echo the spec as written
    assert res(m, "pytorch-cpu,platform=linux/arm64").replace(reasons=()) == same
    assert res(m, "pytorch-cpu", platform="linux/arm64").replace(reasons=()) == same


def test_amd64_stacks_keep_their_names_tags_and_json(m):
    st = res(m, "pytorch-cu121")
    assert st.platform == "linux/amd64" and st.stack == "pytorch-cu121"
    data = st.to_json()
    assert "platform" not in data and "arch" not in data["base"]
    assert st.base.local_tag == m.base(st.base.name).local_tag


def test_old_json_without_platform_reads_as_amd64_and_arm64_round_trips(m, arm):
    from envgen.core.model import Stack
    old = res(m, "pytorch-cu121").to_json()
    assert Stack.from_json(old).platform == "linux/amd64"
    data = json.loads(json.dumps(arm.to_json()))
    assert data["platform"] == "linux/arm64" and data["base"]["arch"] == "arm64"
    assert stack_problems(data) == []
    assert Stack.from_json(data) == arm.replace(base=Stack.from_json(data).base)
    assert Stack.from_json(data).base.local_tag == arm.base.local_tag


@pytest.mark.parametrize("change,problem", [
    (lambda d: d.update(platform="linux/s390x"), "stack.platform must be"),
    (lambda d: d.update(platform="linux/arm64; rm -rf /"), "stack.platform must be"),
    (lambda d: d["base"].pop("arch"), "stack.base.arch and stack.platform disagree"),
    (lambda d: d["base"].update(arch="riscv64"), "stack.base.arch must be arm64")])
def test_a_label_or_lock_with_a_bad_platform_is_refused(arm, change, problem):
    data = json.loads(json.dumps(arm.to_json()))
    change(data)
    assert any(p.startswith(problem) for p in stack_problems(data)), stack_problems(data)


@pytest.mark.parametrize("gpu", ["GH200", "GB200", "GB300", "GB10"])
def test_a_grace_gpu_means_linux_arm64(m, gpu):
    g = m.gpu(gpu)
    assert g.platform == "linux/arm64" and g.platform_source.startswith("https://www.nvidia")
    st = res(m, "torch", gpu=gpu, driver="580.95.05")
    assert st.platform == "linux/arm64" and st.stack.endswith("-arm64")
    assert st.variant != "cpu" and any("Grace" in r for r in st.reasons)


def test_a_grace_gpu_asked_for_amd64_is_refused_in_one_sentence(m):
    with pytest.raises(InputError) as e:
        res(m, "torch", gpu="GH200", platform="linux/amd64")
    assert "Grace" in e.value.message and "linux/arm64" in e.value.message
    with pytest.raises(InputError) as e:
        res(m, "torch,platform=linux/amd64", gpu="GB200")
    assert "platform=linux/amd64" in e.value.message and "\n" not in e.value.message


@pytest.mark.parametrize("gpu", ["Jetson AGX Orin", "Jetson T5000", "Jetson Thor",
                                 "Jetson T4000"])
def test_jetson_is_refused_naming_l4t(m, gpu):
    with pytest.raises(InputError) as e:
        res(m, "torch", gpu=gpu)
    assert "L4T" in e.value.message and "JetPack" in e.value.message


def test_a_variant_without_an_aarch64_wheel_is_refused_with_the_nearest_that_has_one(m):
    with pytest.raises(Unsatisfiable) as e:
        res(m, "torch==2.10.0,variant=cu128,platform=linux/arm64")
    assert "PyPI serves torch 2.10.0 for linux/arm64 only as its cpu build, not cu128 " \
           "(pypi:torch/" in e.value.message
    assert "torch==2.10.0,variant=cpu,platform=linux/arm64" in e.value.hints
    assert any("variant=cu13" in h for h in e.value.hints)
    with pytest.raises(Unsatisfiable) as e:
        res(m, "torch==2.11.0,variant=cpu", platform="linux/arm64")
    assert e.value.hints[0] == "torch==2.11.0,variant=cu130,platform=linux/arm64"


def test_a_framework_with_no_aarch64_facts_is_refused(m):
    import copy
    m2 = copy.copy(m)
    m2.platform_wheels = [w for w in m.platform_wheels if w.package != "tensorflow"]
    with pytest.raises(Unsatisfiable) as e:
        res(m2, "tensorflow-cpu-arm64")
    assert "the matrix holds no linux/arm64 wheels of tensorflow " \
           "(matrices/platforms.yaml)" in e.value.message


def test_tensorflow_on_arm64_is_its_cpu_build_installed_as_tensorflow(m):
    """TensorFlow's aarch64 wheels are CPU builds (no GPU code in them), and on aarch64 the
    cpu variant installs `tensorflow`: tensorflow-cpu has no aarch64 wheel."""
    st = res(m, "tensorflow-cpu-arm64")
    pins = dict(st.packages)
    assert "tensorflow" in pins and "tensorflow-cpu" not in pins
    assert st.platform == "linux/arm64" and st.cuda is None
    with pytest.raises(Unsatisfiable) as e:
        res(m, "tensorflow", gpu="GH200", driver="580.95.05")
    assert f"PyPI serves tensorflow {st.version} for linux/arm64 only as its cpu build" \
        in e.value.message
    assert e.value.hints[0] == f"tensorflow=={st.version},variant=cpu,platform=linux/arm64"
    x86 = dict(res(m, "tensorflow-cpu").packages)
    assert "tensorflow-cpu" in x86   # linux/amd64 keeps the smaller CPU-only wheel


def test_an_unknown_platform_is_bad_input(m):
    with pytest.raises(InputError):
        res(m, "torch", platform="linux/s390x")
    with pytest.raises(InputError):
        parse_spec("torch,platform=windows/arm64", m)


def test_a_framework_over_torch_follows_its_base_platform(m):
    st = res(m, "lightning-cpu-arm64")
    assert st.stack == "lightning-cpu-arm64" and st.platform == "linux/arm64"
    assert st.base_stack().stack == "pytorch-cpu-arm64"


@pytest.mark.parametrize("name, needs", [
    ("pytorch-cpu-arm64", {"torch", "numpy"}),
    ("jax-cpu-arm64", {"jax", "jaxlib", "numpy"}),
    ("jax-cuda13-arm64", {"jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt",
                          "nvidia-cudnn-cu13"})])
def test_the_bundled_arm64_closure_is_every_file_aarch64_or_pure_and_hashed(m, name, needs):
    from envgen.resolve.closure import find, inputs_for, key_of
    arm = res(m, name)
    path = ROOT / "matrices" / "closures" / f"{name}.json"
    data = json.loads(path.read_text())
    assert data["key"] == key_of(inputs_for(arm, resolve=False))   # what build would use
    # the base's glibc: bookworm's 2.36 for torch, trixie's 2.41 for JAX 0.12
    glibc = arm.base.glibc.replace(".", "_")
    assert data["inputs"]["platform"] == f"manylinux_{glibc}_aarch64"
    assert find(arm) is not None
    for p in data["packages"]:
        assert p["hashes"] and p["hashes"][0].startswith("sha256:"), p["name"]
        _, _, _, tags = parse_wheel_filename(p["file"])
        plats = {t.platform for t in tags}
        assert plats == {"any"} or all(x.endswith("_aarch64") for x in plats), p["file"]
    assert needs <= {p["name"] for p in data["packages"]}


def test_uv_and_the_hash_pinner_are_asked_for_aarch64(arm):
    from envgen.resolve.closure import _uv_platform, platform_tags
    assert _uv_platform("manylinux_2_36_aarch64") == "aarch64-manylinux_2_36"
    assert _uv_platform("manylinux_2_41_x86_64") == "x86_64-manylinux_2_40"
    tags = platform_tags("3.11", "manylinux_2_36_aarch64")
    assert tags[0] == "cp311-cp311-manylinux_2_36_aarch64"
    assert not any("x86_64" in t for t in tags)
    assert platform_tags("3.11")[0] == "cp311-cp311-manylinux_2_36_x86_64"


def test_the_rendered_arm64_context_makes_an_arm64_base_and_names_it(arm):
    from envgen.render.views import render_base_script, render_texts
    from envgen.resolve.closure import closure_for
    script = render_base_script(arm.base)
    assert "--architectures=arm64" in script and "build --quiet --platform linux/arm64" in script
    assert '"$DOCKER" import' not in script   # dockerd 20.10's import records its own arch
    plain = render_base_script(record.replace(arm.base, arch=""))
    assert '"$DOCKER" import' in plain and "--platform" not in plain
    texts = render_texts(arm, closure_for(arm, resolve=False)[0])
    assert f"FROM {arm.base.local_tag}" in texts["Dockerfile"]
    assert '\\"platform\\":\\"linux/arm64\\"' in texts["Dockerfile"]


def test_buildkit_is_asked_for_the_stacks_platform(tmp_path, monkeypatch, arm):
    from envgen.runtime import buildkit
    seen = {}

    class Cli:
        argv, env, describe = ["false"], (), "fake"

    def fake_popen(argv, **_kw):
        seen["argv"] = argv
        raise OSError("stop here")
    monkeypatch.setattr(buildkit.subprocess, "Popen", fake_popen)
    run = dict(dockerfile=tmp_path / "Dockerfile", on_line=lambda _m: None,
               failed=lambda: "failed", log=str(tmp_path / "log"))
    with pytest.raises(Exception):
        buildkit.build_buildkit(Cli(), tmp_path, tmp_path / "iid", platform=arm.platform,
                                **run)
    i = seen["argv"].index("--platform")
    assert seen["argv"][i + 1] == "linux/arm64"
    with pytest.raises(Exception):
        buildkit.build_buildkit(Cli(), tmp_path, tmp_path / "iid", **run)
    assert "--platform" not in seen["argv"]


def test_a_certificate_says_when_the_run_was_emulated(arm):
    from envgen.certs.certificate import emulation
    assert emulation(arm.to_json(), "x86_64") == {
        "platform": "linux/arm64", "host_machine": "x86_64", "emulated": True}
    assert emulation(arm.to_json(), "aarch64")["emulated"] is False
    assert emulation({"stack": "pytorch-cu121"}, "x86_64") == {}   # amd64 keeps its form


def test_doctor_reads_the_hosts_machine_and_its_binfmt_handlers(tmp_path):
    from envgen.doctor import platform_facts
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/bin/qemu\n")
    assert platform_facts("x86_64", str(tmp_path)) == {
        "machine": "x86_64", "native": "linux/amd64", "emulated": ["linux/arm64"]}
    (tmp_path / "qemu-aarch64").write_text("disabled\n")
    assert platform_facts("x86_64", str(tmp_path))["emulated"] == []
    assert platform_facts("aarch64", str(tmp_path / "none"))["native"] == "linux/arm64"
    assert platform_facts("riscv64", str(tmp_path))["native"] is None


ARM_2_10 = ("Requires-Dist: filelock\nRequires-Dist: nvidia-cudnn-cu12==9.10.2.21; "
            'platform_system == "Linux" and platform_machine == "x86_64"\n')
ARM_2_11 = """Requires-Dist: nvidia-cudnn-cu13==9.19.0.56; platform_system == "Linux"
Requires-Dist: nvidia-nccl-cu13==2.28.9; platform_system == "Linux"
"""


def test_the_reader_tells_a_cuda_aarch64_wheel_from_a_cpu_one_by_its_markers():
    from envgen.refresh.platforms import cuda_pins, variant_of
    row = {"variants": [{"name": "cu130", "cuda": "13.0.0", "cudnn": "9.19.0.56"},
                        {"name": "cpu", "cuda": None}]}
    assert cuda_pins(ARM_2_10) == {} and variant_of(row, {}, "x") == "cpu"
    pins = cuda_pins(ARM_2_11)
    assert pins == {"nvidia-cudnn-cu13": "9.19.0.56", "nvidia-nccl-cu13": "2.28.9"}
    assert variant_of(row, pins, "torch 2.11.0") == "cu130"


def test_platforms_yaml_states_torchs_aarch64_wheels_with_sources(m):
    rows = {w.version: w for w in m.platform_wheels if w.package == "torch"}
    assert rows["2.10.0"].variant == "cpu" and rows["2.11.0"].variant == "cu130"
    assert all(w.source.startswith("pypi:torch/") and "aarch64" in w.source
               for w in rows.values())
    assert {p.name for p in m.platforms} == {"linux/amd64", "linux/arm64"}


def test_cli_refuses_grace_on_amd64_with_exit_2_and_one_line():
    r = subprocess.run([sys.executable, "-m", "envgen", "resolve", "torch", "--gpu", "GH200",
                        "--platform", "linux/amd64"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and "Grace" in r.stderr


@pytest.mark.parametrize("flags", [["--platform", "linux/arm64"], ["--gpu", "GH200"]])
def test_matrix_list_for_arm64_names_the_stacks_as_resolve_does(flags, capsys):
    """`matrix list --platform linux/arm64` (or a Grace GPU) lists the `-arm64` names, each
    one a name `resolve` takes; the plain list keeps the amd64 names."""
    from envgen.cli import main
    assert main(["matrix", "list", "--json", *flags]) == 0
    rows = json.loads(capsys.readouterr().out)["stacks"]
    assert rows and all(r["stack"].endswith("-arm64") for r in rows)
    met = {r["stack"]: r for r in rows if "error" not in r}
    assert {"pytorch-cpu-arm64", "pytorch-cu130-arm64", "transformers-cu130-arm64"} <= set(met)
    assert met["pytorch-cpu-arm64"]["closure_bundled"] is True
    m = load_matrix()
    for name in ("pytorch-cu130-arm64", "transformers-cu130-arm64"):
        assert resolve(m, parse_spec(name, m)).stack == name
    assert main(["matrix", "list", "--json"]) == 0
    assert not any(r["stack"].endswith("-arm64")
                   for r in json.loads(capsys.readouterr().out)["stacks"])


# ---- JAX on linux/arm64: a row per variant, every pin served for aarch64 ------------------

def _wheel(name):
    return {"filename": name, "url": f"https://files.example/{name}",
            "hashes": {"sha256": "0" * 64}}


class _Index:
    """The simple pages of the projects one JAX release pins."""

    def __init__(self, pages):
        self.pages = pages

    def project(self, name):
        return {"files": [_wheel(n) for n in self.pages.get(name, [])]}


def test_the_reader_writes_a_jax_row_per_variant_whose_every_pin_has_an_aarch64_wheel(
        tmp_path):
    from envgen.refresh.platforms import jax_rows
    from envgen.refresh.pypi import Run
    (tmp_path / "jax.yaml").write_text(json.dumps({"framework_releases": [{
        "framework": "jax", "version": "0.8.0", "variants": [
            {"name": "cuda12", "cuda": "12.9.2", "packages": {
                "jaxlib": "0.8.0", "jax-cuda12-plugin": "0.8.0", "jax-cuda12-pjrt": "0.8.0",
                "nvidia-cublas-cu12": "12.9.1.4"}},
            {"name": "cuda13", "cuda": "13.0.2", "packages": {
                "jaxlib": "0.8.0", "jax-cuda13-plugin": "0.8.0",
                "nvidia-cublas": "13.1.0.3"}},
            {"name": "cpu", "cuda": None, "packages": {"jaxlib": "0.8.0"}}]}]}))
    arm = "manylinux_2_27_aarch64.whl"
    pages = {
        "jaxlib": [f"jaxlib-0.8.0-cp{v}-cp{v}-{arm}" for v in (311, 312, 313)] +
                  ["jaxlib-0.8.0-cp314-cp314-manylinux_2_27_x86_64.whl"],
        "jax-cuda12-plugin": [f"jax_cuda12_plugin-0.8.0-cp{v}-cp{v}-{arm}"
                              for v in (312, 313, 314)],
        "jax-cuda12-pjrt": [f"jax_cuda12_pjrt-0.8.0-py3-none-{arm}"],
        "nvidia-cublas-cu12": [f"nvidia_cublas_cu12-12.9.1.4-py3-none-{arm}"],
        "jax-cuda13-plugin": [f"jax_cuda13_plugin-0.8.0-cp{v}-cp{v}-{arm}"
                              for v in (311, 312, 313)],
        # CUDA 13's cuBLAS served for x86_64 alone: no cuda13 row
        "nvidia-cublas": ["nvidia_cublas-13.1.0.3-py3-none-manylinux_2_27_x86_64.whl"]}
    run = Run(index=_Index(pages), folder=tmp_path)
    rows = {r["variant"]: r for r in jax_rows(run)}
    assert set(rows) == {"cpu", "cuda12"}
    assert rows["cpu"] == {
        "package": "jax", "version": "0.8.0", "platform": "linux/arm64", "variant": "cpu",
        "pythons": ["3.11", "3.12", "3.13"], "packages": {"jaxlib": "0.8.0"},
        "source": f"pypi:jaxlib/jaxlib-0.8.0-cp313-cp313-{arm}"}
    # the CPython lines both jaxlib and the plugin serve; the plugin is the wheel read
    assert rows["cuda12"]["pythons"] == ["3.12", "3.13"]
    assert rows["cuda12"]["source"] == \
        f"pypi:jax-cuda12-plugin/jax_cuda12_plugin-0.8.0-cp313-cp313-{arm}"
    assert rows["cuda12"]["packages"]["nvidia-cublas-cu12"] == "12.9.1.4"
    assert run.warnings == ["jax 0.8.0 cuda13: no linux/arm64 row: PyPI has no aarch64 "
                            "wheel of nvidia-cublas 13.1.0.3"]
    # a plugin whose only aarch64 wheel is free-threaded serves no CPython envgen installs
    pages["jax-cuda12-plugin"] = [f"jax_cuda12_plugin-0.8.0-cp313-cp313t-{arm}"]
    run = Run(index=_Index(pages), folder=tmp_path)
    assert {r["variant"] for r in jax_rows(run)} == {"cpu"}
    assert run.warnings[0] == "jax 0.8.0 cuda12: no linux/arm64 row: PyPI has no aarch64 " \
                              "wheel of jax-cuda12-plugin 0.8.0"
    # jaxlib and the plugin for different CPython lines: no row, and the refresh says why
    pages["jax-cuda12-plugin"] = [f"jax_cuda12_plugin-0.8.0-cp314-cp314-{arm}"]
    run = Run(index=_Index(pages), folder=tmp_path)
    assert {r["variant"] for r in jax_rows(run)} == {"cpu"}
    assert run.warnings[0] == "jax 0.8.0 cuda12: no linux/arm64 row: its pins' aarch64 " \
                              "wheels serve no CPython line in common"


def test_jax_resolves_for_grace_with_its_aarch64_rows(m):
    st = res(m, "jax-cuda12-arm64")
    assert st.stack == "jax-cuda12-arm64" and st.platform == "linux/arm64"
    pins = dict(st.packages)
    assert pins["jaxlib"] == pins["jax-cuda12-plugin"] == st.version
    assert any("linux/arm64 wheel of jax" in r and "jax_cuda12_plugin" in r
               for r in st.reasons)
    st = res(m, "jax", gpu="GH200", driver="580.95.05")
    assert st.platform == "linux/arm64" and st.variant.startswith("cuda")
    assert res(m, "jax-cpu-arm64").variant == "cpu"


def test_a_jax_variant_without_its_aarch64_row_is_refused_naming_those_there(m):
    import copy
    jax = [w for w in m.platform_wheels if w.package == "jax"]
    newest = max((w for w in jax if sum(x.version == w.version for x in jax) == 3),
                 key=lambda w: tuple(int(x) for x in w.version.split(".")))
    rows = [w for w in m.platform_wheels
            if not (w.package == "jax" and w.version == newest.version and w.variant == "cpu")]
    m2 = copy.copy(m)
    m2.platform_wheels = rows
    with pytest.raises(Unsatisfiable) as e:
        res(m2, f"jax=={newest.version},variant=cpu,platform=linux/arm64")
    assert e.value.message.endswith(
        f"PyPI serves jax {newest.version} for linux/arm64 only as its cuda12 and cuda13 "
        f"builds, not cpu")


def test_a_platform_wheel_listed_twice_is_refused(tmp_path):
    import shutil

    from envgen.core.errors import MatrixError
    from envgen.matrix.load import bundled_path
    folder = tmp_path / "m"
    shutil.copytree(bundled_path(), folder, ignore=shutil.ignore_patterns("closures"))
    p = folder / "platforms.yaml"
    text = p.read_text()
    first = text.index("- package: jax")
    row = text[first:text.index("- package:", first + 5)]
    p.write_text(text + row)
    with pytest.raises(MatrixError) as e:
        load_matrix(folder)
    assert "duplicate platform wheel ('jax'" in str(e.value)


def test_an_aarch64_wheel_that_only_installs_another_build_is_no_row():
    """TensorFlow 2.11 to 2.15's aarch64 wheels are 2 KB stand-ins for tensorflow-cpu-aws:
    the platforms reader writes no row for them (and says why)."""
    from envgen.refresh.platforms import stand_in
    shim = ("Metadata-Version: 2.1\nName: tensorflow\nVersion: 2.15.1\n"
            "Requires-Dist: tensorflow-cpu-aws ==2.15.1 ; platform_system == \"Linux\" and "
            "(platform_machine == \"arm64\" or platform_machine == \"aarch64\")\n"
            "Requires-Dist: tensorflow-intel ==2.15.1 ; platform_system == \"Windows\"\n")
    assert stand_in(shim, "tensorflow") == "tensorflow-cpu-aws==2.15.1"
    real = ("Name: tensorflow\nVersion: 2.21.0\nRequires-Dist: tensorboard~=2.20.0\n"
            "Requires-Dist: tensorflow-io-gcs-filesystem>=0.23.1; python_version < \"3.12\"\n"
            "Requires-Dist: nvidia-cublas-cu12<13.0,>=12.5.3.2; extra == \"and-cuda\"\n")
    assert stand_in(real, "tensorflow") is None


def test_tensorflow_before_2_16_has_no_arm64_row(m):
    versions = {w.version for w in m.platform_wheels if w.package == "tensorflow"}
    assert "2.15.1" not in versions and {"2.16.1", "2.21.0"} <= versions
    with pytest.raises(Unsatisfiable) as e:
        res(m, "tensorflow==2.15.1,variant=cpu", platform="linux/arm64")
    assert "PyPI has no linux/arm64 wheel of tensorflow 2.15.1" in e.value.message


def test_a_bare_framework_on_arm64_with_no_gpu_build_there_is_its_cpu_build_said(m):
    """`tensorflow --platform linux/arm64`: PyPI has no GPU build of it for aarch64, and no
    GPU was named, so the cpu build is the answer, with the reason; naming a GPU still
    refuses it (a CPU image for a GPU host is no answer)."""
    st = res(m, "tensorflow", platform="linux/arm64")
    assert st.variant == "cpu" and st.stack == "tensorflow-cpu-arm64"
    assert "PyPI serves no GPU build of tensorflow for linux/arm64: its cpu build" in st.reasons
    with pytest.raises(Unsatisfiable):
        res(m, "tensorflow", gpu="GH200", driver="580.95.05")
    # torch has GPU builds for aarch64: a bare torch stays a CUDA build there
    assert res(m, "torch", platform="linux/arm64").variant.startswith("cu")


# ---- the GPUs an arm64 CUDA build has code for: its own wheel's, not x86_64's -------------

def test_an_arm64_torch_build_claims_the_gpus_its_own_wheel_has_code_for(m):
    """torch's aarch64 CUDA wheels carry SASS 8.0, 9.0, 10.0, 11.0 and 12.0 (read from
    them, envgen/refresh/wheel_archs.yaml), not the x86_64 wheels' list with 7.5: a T4
    (7.5) in an arm64 host is refused, Thor's 11.0 is served."""
    from envgen.refresh import wheel_archs
    with pytest.raises(Unsatisfiable, match="no kernels for compute capability 7.5"):
        res(m, "torch", platform="linux/arm64", gpu="T4", driver="580.95.05")
    assert res(m, "torch", platform="linux/arm64", cc="11.0",
               driver="580.95.05").stack == "pytorch-cu132-arm64"
    x86 = res(m, "pytorch-cu132")
    assert "7.5" in x86.compute_capabilities
    read = wheel_archs.load("torch", platform="linux/arm64")
    rows = [w for w in m.platform_wheels if w.package == "torch" and w.variant != "cpu"]
    assert len(rows) >= 7
    for w in rows:
        rec = read[w.version]
        assert w.source.endswith(rec["wheel"]) and list(w.compute_capabilities) == \
            rec["sass"] and w.ptx == (rec["ptx"][-1] if rec["ptx"] else None), w.version


def test_the_record_keeps_each_platforms_wheel_apart(tmp_path):
    from envgen.refresh import wheel_archs
    row = {"project": "torch", "version": "2.15.0", "variant": "cu132", "wheel": "t.whl",
           "sha256": "ab" * 32, "library": "lib.so", "fatbins": 2, "build": 2,
           "sass": ["8.0"], "ptx": [], "partial": []}
    path = tmp_path / "wheel_archs.yaml"
    path.write_text(wheel_archs.dump([row, {**row, "platform": "linux/arm64",
                                            "sass": ["9.0"]}]))
    assert wheel_archs.load("torch", path)["2.15.0"]["sass"] == ["8.0"]
    assert wheel_archs.load("torch", path, "linux/arm64")["2.15.0"]["sass"] == ["9.0"]
    doc = {"platform_wheels": [
        {"package": "torch", "version": "2.15.0", "platform": "linux/arm64",
         "variant": "cu132", "source": "pypi:torch/torch-2.15.0-cp315-cp315-aarch64.whl"},
        {"package": "torch", "version": "2.10.0", "platform": "linux/arm64",
         "variant": "cpu", "source": "pypi:torch/torch-2.10.0-cp314-aarch64.whl"}]}
    assert wheel_archs.platform_targets(doc, "torch", "linux/arm64") == [
        ("2.15.0", "cu132", "torch-2.15.0-cp315-cp315-aarch64.whl")]
