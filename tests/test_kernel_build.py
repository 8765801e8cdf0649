"""CUDA-kernel sdists of a project (issue 28): which sdists compile kernels against torch, what
uv is told instead of building them, the hash-pinned compiler and tools of the image's
kernel-build stage, the compute capabilities they are compiled for, the refusal for a
stack whose CUDA has no compiler on PyPI, and what the closure, the project file and the
stack's JSON accept. Offline; the real build is tests/test_project_from_real.py's
torch-kernel project (docker) and docs/project.md's record."""
from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from envgen.core.errors import InputError, MatrixError
from envgen.core.model import Closure, Pin
from envgen.resolve import kernels as k
from envgen.resolve.closure import parse_closure

SETUP_CUDA = b"""from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
setup(name="x", ext_modules=[CUDAExtension("x", ["x.cu"])], cmdclass={"build_ext": BuildExtension})
"""
SETUP_PLAIN = (b"from setuptools import setup, Extension\n"
               b"setup(ext_modules=[Extension('c', ['c.c'])])\n")
PKG_INFO = b"Metadata-Version: 2.1\nName: x\nVersion: 0.1.0\nRequires-Dist: torch\n" \
           b"Requires-Dist: einops>=0.8\n\nlong description\nRequires-Dist: not-this\n"


def sdist(path: Path, files: dict[str, bytes]) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in files.items():
            info = tarfile.TarInfo(f"x-0.1.0/{name}")
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(buf.getvalue()))
    return path


def test_a_setup_py_building_a_torch_cuda_extension_is_a_kernel_sdist(tmp_path):
    cuda = sdist(tmp_path / "x-0.1.0.tar.gz", {"setup.py": SETUP_CUDA, "x.cu": b"",
                                               "PKG-INFO": PKG_INFO})
    plain = sdist(tmp_path / "c-0.1.0.tar.gz", {"setup.py": SETUP_PLAIN})
    deep = sdist(tmp_path / "d-0.1.0.tar.gz", {"tests/ext/setup.py": SETUP_CUDA,
                                               "csrc/cutlass/test/t.cu": b"",
                                               "csrc/cutlass/examples/e.cu": b""})
    assert k.builds_against_torch(cuda)
    assert not k.builds_against_torch(plain)
    assert not k.builds_against_torch(deep)          # a test's setup.py is not the package's
    assert k.cu_files(cuda) == 1 and k.cu_files(plain) == 0
    assert k.cu_files(deep) == 0      # a vendored library's tests and examples are not built
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not an archive")
    assert not k.builds_against_torch(junk) and k.cu_files(junk) == 0


def test_uv_is_told_what_the_sdist_requires_from_its_own_pkg_info(tmp_path):
    cuda = sdist(tmp_path / "x-0.1.0.tar.gz", {"setup.py": SETUP_CUDA, "PKG-INFO": PKG_INFO})
    nometa = sdist(tmp_path / "y-0.1.0.tar.gz", {"setup.py": SETUP_CUDA})
    plain = sdist(tmp_path / "c-0.1.0.tar.gz", {"setup.py": SETUP_PLAIN, "PKG-INFO": PKG_INFO})
    assert k.requires_dist(cuda) == ["torch", "einops>=0.8"]   # the body is not read
    assert k.requires_dist(nometa) == []     # setup() names no install_requires
    got = k.metadata_for({"x": ("0.1.0", cuda), "y": ("0.1.0", nometa),
                          "c": ("0.1.0", plain)})
    assert got == [{"name": "x", "version": "0.1.0", "requires-dist": ["torch", "einops>=0.8"]},
                   {"name": "y", "version": "0.1.0", "requires-dist": []}]


SETUP_REQS = SETUP_CUDA.replace(b'name="x",', b'name="x", install_requires=["torch", "einops"],')


@pytest.mark.parametrize("files, want", [
    # a git archive has no PKG-INFO: its setup.py's literal list is read, never run
    ({"setup.py": SETUP_REQS}, ["torch", "einops"]),
    ({"setup.py": SETUP_CUDA.replace(b'name="x",', b'name="x", install_requires=REQS,')},
     None),                                                    # computed: uv is left to say
    ({"setup.py": b"kw = dict(install_requires=['einops'])\n" + SETUP_CUDA.replace(
        b'name="x",', b'name="x", **kw,')}, None),               # setup(**kw): not written here
    ({"setup.py": b"import os\n"}, None),                      # calls no setup()
    ({"setup.py": b"def (:\n"}, None),                         # not Python
    ({"pyproject.toml": b'[project]\nname = "x"\ndependencies = ["torch>=2.4", "ninja"]\n',
      "setup.py": SETUP_REQS}, ["torch>=2.4", "ninja"]),
    ({"pyproject.toml": b'[project]\nname = "x"\ndynamic = ["dependencies"]\n',
      "setup.py": SETUP_REQS}, ["torch", "einops"]),             # dynamic: setup.py says
    ({"pyproject.toml": b"not toml [", "setup.py": SETUP_REQS}, ["torch", "einops"]),
])
def test_without_pkg_info_the_archives_own_files_say_what_it_requires(tmp_path, files, want):
    assert k.requires_dist(sdist(tmp_path / "x-0.1.0.tar.gz", files)) == want


def test_a_requirement_an_archive_states_that_is_not_one_is_one_sentence(tmp_path):
    bad = sdist(tmp_path / "x-0.1.0.tar.gz", {"setup.py": SETUP_CUDA, "PKG-INFO": PKG_INFO.replace(
        b"einops>=0.8", b"einops <<garbage")})
    with pytest.raises(InputError, match=r"x 0.1.0 \(x-0.1.0.tar.gz\) states a requirement "
                                         r"that is not one: 'einops <<garbage'"):
        k.metadata_for({"x": ("0.1.0", bad)})


def test_known_kernel_sdists_and_held_archives_are_told_apart_from_other_sdists(tmp_path):
    cuda = sdist(tmp_path / "x-0.1.0.tar.gz", {"setup.py": SETUP_CUDA})
    pins = [Pin("flash-attn", "2.8.3", file="flash_attn-2.8.3.tar.gz", sha256="a" * 64),
            Pin("x", "0.1.0", file="x-0.1.0.tar.gz", sha256="b" * 64),
            Pin("crcmod", "1.7", file="crcmod-1.7.tar.gz", sha256="c" * 64),
            Pin("einops", "0.8.2", file="einops-0.8.2-py3-none-any.whl", sha256="d" * 64)]
    assert k.kernel_sdists(pins, {"x": cuda}) == ["flash-attn", "x"]


def stack(cuda, ptx="12.0", archs=(), project=True):
    layer = SimpleNamespace(cuda_archs=archs) if project else None
    return SimpleNamespace(stack=f"pytorch-cu{str(cuda or 'cpu').replace('.', '')}",
                           cuda=cuda, ptx=ptx, project=layer,
                           compute_capabilities=("7.5", "8.0", "9.0", "12.0"))


@pytest.mark.parametrize("cuda, words", [
    ("12.1", "CUDA 12 wheels on PyPI (nvidia-cuda-nvcc-cu12, 12.0 to 12.9) carry ptxas but "
             "no nvcc"),
    ("11.8", "nvidia-cuda-nvcc-cu11) carry ptxas but no nvcc"),
    (None, "pytorch-cucpu is a CPU stack, with no CUDA to compile for"),
])
def test_a_stack_whose_cuda_has_no_compiler_wheels_is_refused_in_one_sentence(cuda, words):
    e = k.refuse(stack(cuda), "envgen-axpy", "envgen.yaml")
    assert words in e.message and "choose a CUDA 13 stack" in e.message
    assert e.package == "envgen-axpy" and e.file == "envgen.yaml"


def test_the_compiler_is_the_one_nvidias_metapackage_names_for_the_stacks_cuda():
    with_meta = [Pin("cuda-toolkit", "13.0.3"), Pin("nvidia-cuda-runtime", "13.0.96")]
    assert k.compiler_requirements(stack("13.0"), with_meta) == [
        "cuda-toolkit[nvcc,crt,nvvm,cccl]==13.0.3"]
    alone = [Pin("nvidia-cuda-runtime", "13.0.96")]
    assert k.compiler_requirements(stack("13.0"), alone)[:3] == [
        "nvidia-cuda-nvcc==13.0.96", "nvidia-nvvm==13.0.96", "nvidia-cuda-crt==13.0.96"]
    assert k.compiler_requirements(stack("13.0"), []) == []
    # torch 2.15 (cu132) holds CCCL 13.3.5 while cuda-toolkit 13.2.2[cccl] asks 13.2.86:
    # the closure's headers stay, or the kernel tools have no resolution at all
    cu132 = [Pin("cuda-toolkit", "13.2.2"), Pin("nvidia-cuda-cccl", "13.3.5.0.6"),
             Pin("nvidia-cuda-runtime", "13.2.86")]
    assert k.compiler_requirements(stack("13.2"), cu132) == [
        "cuda-toolkit[nvcc,crt,nvvm]==13.2.2"]


def test_the_arch_list_is_the_targets_else_the_frameworks_own_with_ptx_last():
    assert k.arch_list(stack("13.0", archs=("8.0", "9.0"))) == "8.0;9.0"
    assert k.arch_list(stack("13.0")) == "7.5;8.0;9.0;12.0+PTX"
    assert k.arch_list(stack("13.0", ptx=None, project=False)) == "7.5;8.0;9.0;12.0"


def test_the_build_time_grows_with_sources_and_capabilities():
    one = k.estimate(1, "9.0", jobs=2)
    many = k.estimate(10, "8.0;9.0;10.0", jobs=2)
    assert one == f"expect about {k.SECONDS_PER_FILE_ARCH} s on 2 cores (1 CUDA source(s) x 1 " \
                  f"compute capability)"
    assert many.startswith(f"expect about {round(5 * 3 * k.SECONDS_PER_FILE_ARCH / 60)} min")
    assert "not known beforehand" in k.estimate(None, "9.0")


BUILD = {"name": "ninja", "version": "1.13.2", "file": "ninja-1.13.2-py3-none-any.whl",
         "hashes": ["sha256:" + "e" * 64]}


def closure_json(**kernel):
    c = Closure(key="f" * 64, inputs={"requirements": ["x"]}, created="2026-12-01T00:00:00Z",
                pins=(Pin("x", "0.1.0", file="x-0.1.0.tar.gz", sha256="a" * 64),))
    data = c.to_json()
    if kernel:
        data["kernel_build"] = kernel
    return data


def test_a_closure_carries_its_kernel_build_and_reads_it_back():
    data = closure_json(sdists=["x"], packages=[BUILD])
    c = parse_closure(json.loads(json.dumps(data)), "envgen.lock")
    assert c.kernels == ("x",) and c.build_pins[0].name == "ninja"
    assert c.to_json()["kernel_build"] == data["kernel_build"]
    plain = parse_closure(closure_json(), "c.json")
    assert "kernel_build" not in plain.to_json()      # closures without one are unchanged


@pytest.mark.parametrize("kernel, words", [
    ({"sdists": ["y"], "packages": [BUILD]}, "kernel_build.sdists must name packages"),
    ({"sdists": ["x"], "packages": []}, "kernel_build.packages must be a list"),
    ({"sdists": ["x"], "packages": [{**BUILD, "hashes": [], "hash_note": "none"}]},
     "every file the build stage installs is hash-pinned"),
    ({"sdists": ["x"], "packages": [{**BUILD, "name": "--index-url=x"}]},
     "is not a distribution name"),
    ({"sdists": ["x"]}, "'kernel_build' must be an object of sdists and packages"),
])
def test_a_hostile_kernel_build_in_a_lock_is_one_sentence(kernel, words):
    with pytest.raises(InputError) as e:
        parse_closure(closure_json(**kernel), "envgen.lock")
    assert words in e.value.message and e.value.file == "envgen.lock"


def project_file(tmp_path, archs: str) -> Path:
    p = tmp_path / "envgen.yaml"
    p.write_text(f"stack: pytorch-cu130\nname: kproj\ncuda_archs: {archs}\n")
    return p


def test_the_project_file_takes_compute_capabilities():
    import tempfile

    from envgen.resolve.project import load
    with tempfile.TemporaryDirectory() as d:
        layer = load(project_file(Path(d), '["8.0", "9.0", "10.0a"]')).layer
    assert layer.cuda_archs == ("8.0", "9.0", "10.0a")
    assert layer.to_json()["cuda_archs"] == ["8.0", "9.0", "10.0a"]


@pytest.mark.parametrize("archs, words", [
    ('["sm_90"]', "cuda_archs entry 'sm_90' must be a compute capability"),
    ('["9.0;8.0"]', "must be a compute capability"),
    ('["9.0", "9.0"]', "lists a compute capability twice"),
    ('"9.0"', "'cuda_archs' must be a list"),
])
def test_a_bad_compute_capability_in_the_project_file_is_refused_at_its_line(
        tmp_path, archs, words):
    from envgen.resolve.project import load
    with pytest.raises(MatrixError) as e:
        load(project_file(tmp_path, archs))
    assert words in e.value.message and e.value.line == 3


def test_the_stack_json_refuses_a_cuda_arch_that_is_no_compute_capability():
    """A label or lock carries the project's cuda_archs: only compute capabilities pass."""
    from envgen.core.model import ProjectLayer
    from envgen.matrix.load import load_matrix
    from envgen.matrix.wire import stack_problems
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    m = load_matrix()
    st = resolve(m, parse_spec("pytorch-cu130", m))
    good = st.replace(project=ProjectLayer(name="kproj", cuda_archs=("9.0", "12.0a")))
    assert stack_problems(good.to_json()) == []
    for bad in ("9.0;rm -rf /", "--x", "sm_90"):
        data = good.to_json()
        data["project"]["cuda_archs"] = [bad]
        assert any("cuda_archs must be compute capabilities" in p
                   for p in stack_problems(data)), bad


def test_the_dockerfile_compiles_kernels_in_a_stage_over_the_images_own_layers():
    """Offline render of a project over pytorch-cu130 whose closure holds a kernel sdist:
    the image's stage is named, kernel-build starts from it, installs the hash-pinned tools,
    compiles for the project's compute capabilities, and the image takes only the wheels."""
    from envgen.core.model import ProjectLayer
    from envgen.matrix.load import load_matrix
    from envgen.render.views import render_texts
    from envgen.resolve.closure import closure_for
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    m = load_matrix()
    plain = resolve(m, parse_spec("pytorch-cu130", m))
    axpy = Pin("envgen-axpy", "0.1.0", file="envgen_axpy-0.1.0.tar.gz", sha256="a" * 64)
    layer = ProjectLayer(name="kproj", pip=(("envgen-axpy", "0.1.0"),), cuda_archs=("9.0",))
    st = plain.replace(packages=plain.packages + (("envgen-axpy", "0.1.0"),), project=layer)
    base = closure_for(plain, resolve=False)[0]
    tool = Pin("ninja", "1.13.2", file="ninja-1.13.2-py3-none-any.whl", sha256="e" * 64)
    c = Closure(key=base.key, inputs=base.inputs, pins=base.pins + (axpy,),
                created=base.created, stack=st.stack, kernels=("envgen-axpy",),
                build_pins=(tool,))
    texts = render_texts(st, c)
    df = texts["Dockerfile"]
    lines = [x for x in df.splitlines() if x.startswith("FROM ")]
    assert lines[-3:] == ["FROM env AS stack", "FROM stack AS kernel-build", "FROM stack"]
    assert "TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS" in df and "ARG MAX_JOBS=2" in df
    assert "--no-build-isolation --no-binary=:all: --require-hashes" in df
    assert "--mount=type=bind,from=kernel-build,source=/opt/kernel-wheels" in df
    tools = texts["install/7-kernel-tools/requirements.txt"]
    assert "ninja==1.13.2 \\\n    --hash=sha256:" + "e" * 64 in tools
    kernel = texts["install/7-project-kernels/requirements.txt"]
    assert "envgen-axpy==0.1.0" in kernel and "a" * 64 in kernel
    # the image's own layers do not install the tools or the sdist
    assert [n for n, t in texts.items() if "ninja==" in t] == [
        "install/7-kernel-tools/requirements.txt"]
    assert json.loads(texts["closure.json"])["kernel_build"]["sdists"] == ["envgen-axpy"]
    # the stage's apt reads a Debian mirror, and `envgen build` asks for one
    from envgen.render.views import reads_debian_mirror
    assert "ARG ENVGEN_DEBIAN_MIRROR=" in df and reads_debian_mirror(st, c)


def test_a_known_kernel_package_pinned_exactly_is_read_from_its_sdist_on_the_index(
        tmp_path, monkeypatch):
    """flash-attn==2.6.3's PKG-INFO predates metadata 2.2, so uv would build it to ask what
    it requires: envgen fetches the sdist the index lists (checked by its sha256) and tells
    uv instead, on a CUDA 13 stack only; a range, a URL or a CUDA 12 stack is left to uv."""
    import hashlib

    import envgen.resolve.closure as cl
    import envgen.resolve.project_closure as pc
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    fa = sdist(tmp_path / "flash_attn-2.6.3.tar.gz", {"setup.py": SETUP_CUDA,
                                                      "PKG-INFO": PKG_INFO})
    page = {"files": [{"filename": fa.name, "url": fa.as_uri(),
                       "hashes": {"sha256": hashlib.sha256(fa.read_bytes()).hexdigest()}}]}
    asked = []
    monkeypatch.setattr(cl, "fetch_json", lambda url: asked.append(url) or page)
    cu130 = SimpleNamespace(cuda="13.0", index_url=None)
    got = pc.kernel_sdists_on_index(cu130, ["torch==2.14.1", "flash-attn==2.6.3"])
    assert list(got) == ["flash-attn"] and got["flash-attn"][0] == "2.6.3"
    assert asked == ["https://pypi.org/simple/flash-attn/"]
    assert k.metadata_for(got)[0]["requires-dist"] == ["torch", "einops>=0.8"]
    assert pc.kernel_sdists_on_index(cu130, ["flash-attn>=2.6"]) == {}
    assert pc.kernel_sdists_on_index(SimpleNamespace(cuda="12.1", index_url=None),
                                     ["flash-attn==2.6.3"]) == {}
    page["files"][0]["hashes"]["sha256"] = "0" * 64    # not the bytes the index serves
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home2"))
    assert pc.kernel_sdists_on_index(cu130, ["flash-attn==2.6.3"]) == {}


def test_a_lock_carries_the_kernel_stage_to_a_rebuild():
    """`envgen verify --rebuild` renders from the lock alone: its closure summary keeps the
    kernel_build and pure_sdists, and a rebuild's closure has them back (checked as any)."""
    from envgen.core.model import ProjectLayer
    from envgen.lock.verify import lock_closure
    from envgen.matrix.load import load_matrix
    from envgen.resolve.spec import parse_spec
    from envgen.resolve.stack import resolve
    m = load_matrix()
    st = resolve(m, parse_spec("pytorch-cu130", m)).replace(
        project=ProjectLayer(name="kproj", pip=(("x", "0.1.0"),)))
    entry = {"stack": st.to_json(),
             "closure": {"key": "f" * 64, "resolver": "uv", "created": "2026-12-01T00:00:00Z",
                         "kernel_build": {"sdists": ["x"], "packages": [BUILD]},
                         "pure_sdists": []},
             "requirements": [Pin("x", "0.1.0", file="x-0.1.0.tar.gz", sha256="a" * 64,
                                  note="from file:///p/x-0.1.0.tar.gz").to_json()]}
    c = lock_closure(entry)
    assert c.kernels == ("x",) and c.build_pins[0].name == "ninja"
    entry["closure"]["kernel_build"]["sdists"] = ["not-in-the-lock"]
    with pytest.raises(InputError):
        lock_closure(entry)


def test_a_held_sdist_is_found_by_its_pin_alone_or_the_rebuild_says_what_to_do(
        tmp_path, monkeypatch):
    import hashlib

    from envgen.build.context import _copy_archives
    from envgen.core.model import ProjectLayer
    from envgen.resolve.held import held_sdist, kept_bytes
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    data = b"an sdist"
    sha = hashlib.sha256(data).hexdigest()
    url = Pin("x", "0.1.0", file="x-0.1.0.tar.gz", sha256=sha, note="from file:///p/x.tar.gz")
    git = Pin("y", "1.0", file="y-1.0.tar.gz", sha256=sha,
              note="built from git https://h/r.git at " + "c" * 40)
    index = Pin("z", "1.0", file="z-1.0.tar.gz", sha256=sha)
    assert held_sdist(url) and held_sdist(git) and not held_sdist(index)
    assert kept_bytes(url) is None
    stack = SimpleNamespace(project=ProjectLayer(name="p"))
    with pytest.raises(InputError) as e:
        _copy_archives(stack, Closure(key="k", inputs={}, pins=(url,)), tmp_path / "ctx")
    assert "which this machine does not hold" in e.value.message
    for folder, pin in ((tmp_path / "home" / "files" / sha, url),
                        (tmp_path / "home" / "archives" / ("c" * 40), git)):
        folder.mkdir(parents=True)
        (folder / pin.file).write_bytes(data)
    assert _copy_archives(stack, Closure(key="k", inputs={}, pins=(url, git, index)),
                          tmp_path / "ctx")
    assert sorted(p.name for p in (tmp_path / "ctx").iterdir()) == ["x-0.1.0.tar.gz",
                                                                    "y-1.0.tar.gz"]
    assert all(f.read_bytes() == data for f in (tmp_path / "ctx").iterdir())
    (tmp_path / "home" / "files" / sha / url.file).write_bytes(b"changed")
    assert kept_bytes(url) is None      # bytes that are not the pin's are not used
