"""init --from for real: small public-style projects of tests/projects/, each from its file
to an image over pytorch-cu121 (the `built` fixture's layers, built once), and a JAX/Flax
one over jax-cpu (`built_small`), certified at level cpu with the import check init --from
wrote."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest
from services import ROOT, docker, remove_own_image

pytestmark = pytest.mark.docker
PROJECTS = ROOT / "tests" / "projects"


def envgen(*argv, cwd, home):
    return subprocess.run([sys.executable, "-m", "envgen", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=1800,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "ENVGEN_HOME": home})


def build_certified(folder, home) -> dict:
    """`envgen build --certify --json` in the project's folder: its JSON, which must say
    passed, with the stored certificate's report under "report" (its import check passed)."""
    b = envgen("build", "--certify", "--json", cwd=folder, home=home)
    assert b.returncode == 0, b.stdout[-1500:] + b.stderr[-1500:]
    got = json.loads(b.stdout)
    assert got["certificate"]["passed"], got
    report = json.loads(open(got["certificate"]["path"]).read())["report"]
    smoke = [c for c in report["checks"] if c["name"] == "project smoke"]
    assert smoke and smoke[0]["passed"], report["checks"]
    return {**got, "report": report}


@pytest.mark.parametrize("project,argv,imports", [
    # with a local wheel: pinned by its sha256, installed from the build context
    ("torch-requirements", ["requirements.txt"],
     {"einops", "tqdm", "typing_extensions", "envgen_tinywheel"}),
    ("torch-conda", ["environment.yml"], {"einops"}),
    # crcmod 1.7 is an sdist with a C extension: built in the builder stage
    ("torch-crc-pyproject", ["pyproject.toml", "--extra", "train"], {"crcmod", "einops"}),
    # a git reference to a local repository made here, pinned to its tag's commit
    ("git-dep", ["requirements.txt"], {"envgen_tinylib"}),
])
def test_a_team_file_becomes_a_certified_image(tmp_path, built, home, images_before,
                                               project, argv, imports):
    folder = tmp_path / project
    shutil.copytree(PROJECTS / project, folder)
    if project == "git-dep":
        repo = tmp_path / "tinylib"
        shutil.copytree(PROJECTS / project / "tinylib-src", repo)
        git = ["git", "-C", str(repo), "-c", "user.email=t@e", "-c", "user.name=t"]
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "v0.3.1"], check=True)
        subprocess.run([*git, "tag", "v0.3.1"], check=True)
        (folder / "requirements.txt").write_text(
            (folder / "requirements.in").read_text().replace("REPO", repo.as_uri()))
    r = envgen("init", "--from", *argv, "--name", project, "--json", cwd=folder, home=home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stack"] == "pytorch-cu121"
    assert imports <= set(out["smoke"][2].removeprefix("import ").split(", "))
    # every import is read from a file (the index's, the git archive, the local wheel)
    assert not [n for n in out["notes"] if "guessed" in n], out["notes"]
    if project in ("git-dep", "torch-crc-pyproject"):   # the sdists and their backends named
        said = [n for n in out["notes"] if "project-build stage" in n]
        assert said and "setuptools " in said[0] and "checked by its sha256" in said[0], said
    got = build_certified(folder, home)
    try:
        if project in ("git-dep", "torch-crc-pyproject"):
            # the sdists build with their backends pinned by hash (the closure holds them),
            # installed into the stage's own folder, not in pip's isolated environment
            log = open(got["log"]).read()
            assert "--require-hashes --target /opt/build-tools" in log
            assert "PYTHONPATH=/opt/build-tools" in log and "--no-build-isolation" in log
            inside = docker("run", "--rm", "--network", "none", got["image_id"],
                            "cat", "/opt/envgen/closure.json")
            tools = json.loads(inside.stdout)["sdist_build"]["packages"]
            assert {"setuptools", "wheel"} <= {t["name"] for t in tools}
            assert all(t["hashes"] and t["file"].endswith(".whl") for t in tools)
        # the plain image's lower layers are shared
        assert got["layers"][:3] == built["layers"][:3]
        if project == "git-dep":   # the commit is what envgen.yaml and the closure hold
            head = subprocess.run(["git", "-C", str(tmp_path / "tinylib"), "rev-parse", "HEAD"],
                                  capture_output=True, text=True).stdout.strip()
            assert f"@{head}" in (folder / "envgen.yaml").read_text()
            # a pure-Python sdist: its builder stage runs no apt step (no compiler) and
            # builds with the base's own pip wheel
            log = open(got["log"]).read()
            assert "/usr/share/python-wheels/pip-" in log and " wheel --no-cache-dir" in log
            assert "apt-get" not in log and " gcc " not in log
        if project == "torch-requirements":   # the local wheel, by the sha256 of its bytes
            wheel = PROJECTS / project / "wheels" / "envgen_tinywheel-0.2.0-py3-none-any.whl"
            sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
            assert f"#sha256={sha}" in (folder / "envgen.yaml").read_text()
        if project == "torch-crc-pyproject":   # the compiled extension, and no compiler
            inside = docker("run", "--rm", "--network", "none", got["image_id"], "sh", "-c",
                            "python -c 'import crcmod._crcfunext as m; print(m.__file__)';"
                            " command -v gcc || echo no-gcc")
            assert "_crcfunext" in inside.stdout and ".so" in inside.stdout, inside
            assert "no-gcc" in inside.stdout
            assert "--no-install-recommends gcc g++ python3-dev python3-venv" in \
                open(got["log"]).read()
    finally:
        remove_own_image(got["image_id"], images_before)


def test_a_jax_project_with_the_cpu_extra_builds_over_jax_cpu(tmp_path, built_small, home,
                                                              images_before):
    """`jax[cpu]==...` reads as the cpu variant; with flax named, the project goes over the
    flax-cpu stack (Flax as a framework over jax, its closure resolved with uv), on the same
    Debian trixie base as the session's jax-cpu image, and its own package lands in a layer
    over them."""
    folder = tmp_path / "jax-requirements"
    shutil.copytree(PROJECTS / "jax-requirements", folder)
    r = envgen("init", "--from", "requirements.txt", "--name", "jaxproj", "--json",
               cwd=folder, home=home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stack"].endswith("-cpu"), out["stack"]
    assert {"einops", "flax", "jax"} <= set(out["smoke"][2].removeprefix("import ").split(", "))
    got = build_certified(folder, home)
    try:
        assert got["report"]["versions"].get("jax") == "0.12.0.1"
        assert out["stack"] == "flax-cpu" and got["layers"][0] == built_small["layers"][0]
    finally:
        remove_own_image(got["image_id"], images_before)


def make_sdist(src, out):
    """The project's own sdist from its sources (tests/projects/torch-kernel/axpy-src), byte
    for byte the same each run: a torch CUDAExtension, as a team keeps one beside its file."""
    import gzip
    import io
    import tarfile
    out.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for f in sorted(p for p in src.rglob("*") if p.is_file()):
            info = tarfile.TarInfo(f"envgen_axpy-0.1.0/{f.relative_to(src).as_posix()}")
            data = f.read_bytes()
            info.size, info.mtime, info.mode = len(data), 1764547200, 0o644
            t.addfile(info, io.BytesIO(data))
    out.write_bytes(gzip.compress(buf.getvalue(), mtime=0))


# Each CUDA fat binary's entries in an ELF file, read inside the image by its own Python:
# (kind, sm) with kind 1 for PTX and 2 for a cubin (the fatbin header cuobjdump reads).
FATBIN = r"""
import glob, struct, sys
f = glob.glob(sys.prefix + "/lib/python3*/site-packages/envgen_axpy*.so")[0]
data, out = open(f, "rb").read(), set()
i = data.find(b"\x50\xed\x55\xba")
while i != -1:
    _m, _v, hsize, fsize = struct.unpack_from("<IHHQ", data, i)
    j, end = i + hsize, i + hsize + fsize
    while j < end:
        kind, _u, ehsize, size = struct.unpack_from("<HHIQ", data, j)
        out.add((kind, struct.unpack_from("<I", data, j + 28)[0]))
        j += ehsize + size
    i = data.find(b"\x50\xed\x55\xba", end)
print(sorted(out))
"""


def test_a_project_cuda_kernel_is_compiled_in_the_image_for_the_target_gpus(
        tmp_path, home, images_before):
    """A team's own torch CUDAExtension (an sdist beside its requirements file) over
    pytorch-cu130 for H100s: nvcc from NVIDIA's wheels compiles it in the kernel-build stage
    for compute capability 9.0 alone, only its wheel enters the image, and the import check
    (torch first, so the extension finds torch's libraries) passes at level cpu."""
    folder = tmp_path / "torch-kernel"
    shutil.copytree(PROJECTS / "torch-kernel", folder)
    make_sdist(folder / "axpy-src", folder / "dist" / "envgen_axpy-0.1.0.tar.gz")
    r = envgen("init", "--from", "requirements.txt", "--name", "torch-kernel", "--driver",
               "580.65.06", "--gpu", "H100", "--json", cwd=folder, home=home)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stack"] == "pytorch-cu130"
    assert out["smoke"][2].startswith("import torch, ") and "envgen_axpy" in out["smoke"][2]
    note = [n for n in out["notes"] if "compiles CUDA kernels" in n]
    assert note and "compute capabilities 9.0;" in note[0] and "1 CUDA source(s)" in note[0]
    assert 'cuda_archs: ["9.0"]' in (folder / "envgen.yaml").read_text()
    got = build_certified(folder, home)
    try:
        inside = docker("run", "--rm", "--network", "none", got["image_id"], "sh", "-c",
                        f"python -c '{FATBIN}'; command -v nvcc gcc || echo no-compiler; "
                        "pip show -q nvidia-cuda-nvcc 2>/dev/null || echo no-nvcc-wheel")
        assert inside.stdout.splitlines()[0] == "[(2, 90)]", inside   # one sm_90 cubin
        assert "no-compiler" in inside.stdout and "no-nvcc-wheel" in inside.stdout, inside
        # the operator is registered for CUDA alone: CPU tensors reach no kernel
        op = docker("run", "--rm", "--network", "none", got["image_id"], "python", "-c",
                    "import torch, envgen_axpy\n"
                    "try:\n    torch.ops.envgen_axpy.axpy(torch.ones(4), torch.ones(4), 2.0)\n"
                    "except (RuntimeError, NotImplementedError) as e:\n"
                    "    print('refused:', str(e).splitlines()[0])")
        assert "refused:" in op.stdout and "CPU" in op.stdout, op
        # a teammate's rebuild reads the lock alone: the kernel stage and the sdist, found
        # by its pin, give the same layers
        lock = envgen("lock", "-o", "envgen.lock", cwd=folder, home=home)
        assert lock.returncode == 0, lock.stderr[-1500:]
        entry = next(iter(json.loads((folder / "envgen.lock").read_text())["stacks"].values()))
        assert entry["closure"]["kernel_build"]["sdists"] == ["envgen-axpy"]
        # at level cpu: CI has no GPU to certify this CUDA stack on
        v = envgen("verify", "envgen.lock", "--rebuild", "--level", "cpu", "--json",
                   cwd=folder, home=home)
        assert v.returncode == 0, v.stdout[-1500:] + v.stderr[-1500:]
        assert json.loads(v.stdout)["ok"] is True
    finally:
        remove_own_image(got["image_id"], images_before)


def test_a_cuda_kernel_over_a_cuda_12_stack_is_one_sentence_at_its_line(tmp_path, home):
    """NVIDIA's CUDA 12 wheels hold no nvcc: the same project pinned to torch 2.4.1 (cu121)
    is refused at the sdist's line, with what to do, and nothing is written."""
    folder = tmp_path / "torch-kernel"
    shutil.copytree(PROJECTS / "torch-kernel", folder)
    make_sdist(folder / "axpy-src", folder / "dist" / "envgen_axpy-0.1.0.tar.gz")
    text = (folder / "requirements.txt").read_text().replace("torch==2.14.1", "torch==2.4.1")
    (folder / "requirements.txt").write_text(text)
    r = envgen("init", "--from", "requirements.txt", "--driver", "550.54.15", cwd=folder,
               home=home)
    line = text.splitlines().index("./dist/envgen_axpy-0.1.0.tar.gz") + 1
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"requirements.txt:{line}" in r.stderr and "Traceback" not in r.stderr
    assert "nvidia-cuda-nvcc-cu12, 12.0 to 12.9) carry ptxas but no nvcc" in r.stderr
    assert not (folder / "envgen.yaml").exists()
