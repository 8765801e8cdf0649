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
    got = build_certified(folder, home)
    try:
        # the plain image's lower layers are shared
        assert got["layers"][:3] == built["layers"][:3]
        if project == "git-dep":   # the commit is what envgen.yaml and the closure hold
            head = subprocess.run(["git", "-C", str(tmp_path / "tinylib"), "rev-parse", "HEAD"],
                                  capture_output=True, text=True).stdout.strip()
            assert f"@{head}" in (folder / "envgen.yaml").read_text()
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
