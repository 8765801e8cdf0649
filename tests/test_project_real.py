"""A project (envgen.yaml) for real: `envgen init`, then the team's pinned pip package,
apt package, files and smoke command built over pytorch-cu121 on the real daemon; the
plain image's layers are the project image's lower layers; certification runs the team's
command after envgen's payload, and a failing one fails the certificate; the lock pins it."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from services import ROOT, docker, remove_own_image

pytestmark = pytest.mark.docker

CHECK = ("import einops, json, sys\n"
         "print('project-check', einops.__version__, json.load(open('app/conf/run.json')))\n"
         "sys.exit(int(sys.argv[1]))\n")


def envgen(*argv, cwd, home):
    return subprocess.run([sys.executable, "-m", "envgen", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=1800,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "ENVGEN_HOME": home})


def write_project(folder, exit_code: int):
    (folder / "check.py").write_text(CHECK)
    (folder / "conf").mkdir(exist_ok=True)
    (folder / "conf" / "run.json").write_text('{"lr": 0.1}\n')
    text = (folder / "envgen.yaml").read_text()
    text = text.replace("pip: []", "pip:\n  - einops==0.8.1")
    text = text.replace("apt: []", "apt:\n  - jq")
    text = text.replace("copy: []", "copy:\n  - check.py\n  - src: conf/\n    dest: conf/")
    text += f'smoke: [python, app/check.py, "{exit_code}"]\n'
    (folder / "envgen.yaml").write_text(text)


def test_a_project_builds_over_the_stack_and_its_own_check_decides(tmp_path, built, home,
                                                                  images_before):
    proj = tmp_path / "trainer"
    proj.mkdir()
    r = envgen("init", "pytorch-cu121", cwd=proj, home=home)
    assert r.returncode == 0, r.stderr
    assert "envgen/trainer" in r.stdout
    again = envgen("init", "pytorch-cu121", cwd=proj, home=home)
    assert again.returncode == 2 and "--force" in again.stderr   # never overwritten
    write_project(proj, 0)

    b = envgen("build", "--certify", "--json", cwd=proj, home=home)
    assert b.returncode == 0, b.stdout[-1500:] + b.stderr[-1500:]
    out = json.loads(b.stdout)
    image = out["image_id"]
    try:
        assert out["tag"] == "envgen/trainer:pytorch-cu121-py3.11-debian-bookworm"
        # every layer of the plain image up to its payload's (which holds the stack) and the
        # empty one of WORKDIR, unchanged; then the project's apt, pip and files layers
        plain = built["layers"][:-2]
        assert out["layers"][:len(plain)] == plain
        assert len(out["layers"]) == len(built["layers"]) + 3
        assert out["certificate"]["passed"], out
        cert = json.loads(open(out["certificate"]["path"]).read())
        smoke = [c for c in cert["report"]["checks"] if c["name"] == "project smoke"]
        assert smoke and smoke[0]["passed"] and "project-check 0.8.1 {'lr': 0.1}" in \
            smoke[0]["detail"]
        assert cert["stack"]["project"]["pip"] == {"einops": "0.8.1"}

        inside = docker("run", "--rm", "--network", "none", image, "sh", "-c",
                        "jq --version; stat -c '%U %a' app/check.py; touch app/x")
        assert "jq-1.6" in inside.stdout
        assert "root 644" in inside.stdout
        assert inside.returncode != 0   # the image's user cannot change the team's files

        lock = proj / "envgen.lock"
        lk = envgen("lock", "-o", str(lock), "--json", cwd=proj, home=home)
        assert lk.returncode == 0, lk.stderr
        stacks = json.loads(lock.read_text())["stacks"]
        entry = stacks["trainer.pytorch-cu121"]   # not the plain stack's entry
        assert entry["stack"]["project"]["files"][0]["dest"] == "check.py"
        assert entry["image"]["id"] == image
        assert "einops" in json.dumps(entry["requirements"])
        # CI has no GPU: its certificate of this CUDA stack is at level cpu, which verify
        # reports as drift unless asked for no more (--level cpu)
        v = envgen("verify", str(lock), "--json", cwd=proj, home=home)
        assert v.returncode == 1 and "only a run on a GPU certifies" in v.stdout, v.stdout
        v = envgen("verify", str(lock), "--level", "cpu", "--json", cwd=proj, home=home)
        assert v.returncode == 0, v.stdout[-1500:] + v.stderr[-1500:]

        # the team's check now fails: so does the certificate, and nothing is tagged
        (proj / "envgen.yaml").write_text(
            (proj / "envgen.yaml").read_text().replace('"0"]\n', '"3"]\n'))
        f = envgen("build", "--certify", "--json", "--tag", "envgen-test/failing:1",
                   cwd=proj, home=home)
        assert f.returncode == 1, f.stdout[-1500:] + f.stderr[-1500:]
        failed = json.loads(f.stdout)
        report = json.loads(open(failed["certificate"]["path"]).read())["report"]
        bad = [c for c in report["checks"]
               if c["name"] == "project smoke"]
        assert bad and not bad[0]["passed"] and "exited 3" in bad[0]["detail"]
        assert docker("image", "inspect", "envgen-test/failing:1").returncode != 0
        remove_own_image(failed["image_id"], images_before)
    finally:
        remove_own_image(image, images_before)


def test_an_image_built_from_an_envgen_image_certifies_against_its_stack(tmp_path, built,
                                                                         home):
    from services import TAG
    (tmp_path / "Dockerfile").write_text(
        f"FROM {TAG}\nUSER root\nRUN echo team > /opt/team.txt\nUSER envgen\n")
    tag = "envgen-test/from-envgen:1"
    b = subprocess.run(["docker", "build", "-q", "-t", tag, str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert b.returncode == 0, b.stderr
    try:
        c = envgen("certify", tag, "--gpus", "none", "--json", cwd=tmp_path, home=home)
        assert c.returncode == 0, c.stdout[-1500:] + c.stderr[-1500:]
        cert = json.loads(c.stdout)
        assert cert["passed"] and cert["stack"]["stack"] == "pytorch-cu121"
        assert cert["image_id"] != built["image_id"]   # its own certificate
    finally:
        docker("rmi", tag)
