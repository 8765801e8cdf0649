"""Golden files for `envgen render` of every stack in the bundled matrix, plus host-constrained
renders. After an intended change, refresh them and review the diff:

    ENVGEN_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_render_golden.py

The matrix sha256 (it changes with every matrix edit) is replaced by `<matrix-sha256>`."""
from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
from packaging.version import Version

from envgen.cli import main
from envgen.matrix import load_matrix

GOLDEN = Path(__file__).parent / "golden"
FILES = ("Dockerfile", "apptainer.def", "requirements.txt", "environment.yml",
         "install/3-framework/requirements.txt", "base/build-base.sh")
UPDATE = os.environ.get("ENVGEN_UPDATE_GOLDEN") == "1"
MATRIX = load_matrix()

# golden folder name -> render arguments after the spec
CONSTRAINED = {
    "pytorch-cu130--driver-535.274.02--gpu-H100":
        ["pytorch-cu130", "--driver", "535.274.02", "--gpu", "H100"],
    "torch==2.3.1--driver-520.61.05": ["torch==2.3.1", "--driver", "520.61.05"],
    "pytorch-cu121,python=3.10": ["pytorch-cu121,python=3.10"],
    "torch--gpu-RTX-5090": ["torch", "--gpu", "RTX 5090"],
    "pytorch-cu121--sources-index": ["pytorch-cu121", "--sources", "index"],
}
CASES = {**{name: [name] for name in MATRIX.stack_names()}, **CONSTRAINED}


def _normalise(text: str) -> str:
    return text.replace(MATRIX.sha256, "<matrix-sha256>")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, Path]:
    """Each case rendered once through the CLI into its own folder."""
    from closures import use_fake_resolver
    out = {}
    root = tmp_path_factory.mktemp("render")
    with pytest.MonkeyPatch.context() as mp:
        use_fake_resolver(mp, root)
        for i, (name, argv) in enumerate(CASES.items()):
            d = root / str(i)
            rc = main(["render", *argv, "-o", str(d)])
            assert rc == 0, f"render {shlex.join(argv)} failed"
            out[name] = d
    return out


def test_every_stack_in_matrix_list_has_a_golden_case():
    assert set(MATRIX.stack_names()) <= set(CASES)
    assert len(MATRIX.stack_names()) >= 7


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("filename", FILES)
def test_render_matches_golden(rendered, name, filename):
    if not (rendered[name] / filename).exists() and not (GOLDEN / name / filename).exists():
        return  # e.g. no base recipe for a registry base
    got = _normalise((rendered[name] / filename).read_text())
    golden = GOLDEN / name / filename
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(got)
    assert golden.is_file(), f"no golden file {golden}: run ENVGEN_UPDATE_GOLDEN=1 ..."
    assert got == golden.read_text(), f"{golden} differs (refresh with ENVGEN_UPDATE_GOLDEN=1 " \
                                      f"and review the diff)"


def test_no_stale_golden_folders():
    if UPDATE:
        pytest.skip("updating")
    assert {p.name for p in GOLDEN.iterdir() if p.is_dir()} == set(CASES)


# ---- properties every rendered Dockerfile must have ---------------------------------------

def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction, continuation lines joined, comments dropped."""
    out, buf = [], ""
    for line in dockerfile.splitlines():
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            buf += line.rstrip()[:-1] + " "
            continue
        buf += line
        keyword, _, rest = buf.strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
        buf = ""
    return out


def is_pip(run: str) -> bool:
    """A step that installs a layer, with pip or with uv (`uv pip install --no-config`)."""
    return " install --progress-bar off " in run or " pip install --no-config " in run


def pip_args(run: str) -> list[str]:
    """The options of the `pip install` (or `uv pip install`) in a RUN."""
    at = run.index(" install --progress-bar") if " install --progress-bar" in run else \
        run.index(" pip install --no-config") + 4
    return shlex.split(run[at + 9:].split("&&")[0])


def read_requirements(path: Path) -> dict[str, tuple[str, list[str]]]:
    """name → (version, [sha256 ...]) of a rendered requirements file."""
    out, current = {}, None
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip().rstrip("\\").strip()
        if not line or line.startswith("--index-url"):
            continue
        if line.startswith("--hash=sha256:"):
            out[current][1].append(line.removeprefix("--hash=sha256:"))
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"{path}: {line!r} is not an exact pin"
        current = name
        out[name] = (version, [])
    return out


SECRET_NAME = re.compile(r"TOKEN|PASSWORD|PASSWD|SECRET|NETRC|API_KEY|CREDENTIAL", re.IGNORECASE)
SECRET_FILE = re.compile(r"\.pem\b|\.crt\b|\.key\b|netrc|pypirc|secret|token|id_rsa|"
                         r"ca-bundle|ca-certificates|\bca\b", re.IGNORECASE)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rendered_dockerfile_is_safe_pinned_and_cache_ordered(rendered, name):
    d = rendered[name]
    text = (d / "Dockerfile").read_text()
    stack = json.loads((d / "stack.json").read_text())
    ins = instructions(text)
    keywords = [k for k, _ in ins]

    assert not re.search(r"(?im)^#\s*syntax\s*=", text), "no `# syntax=` line"
    assert keywords[0] == "FROM"
    # one stage, or the installer's throw-away stage beside it: FROM base AS env,
    # FROM env AS uv, FROM env (the image)
    froms = [a for k, a in ins if k == "FROM" and not a.endswith(" AS project-build")]
    assert len(froms) == 1 or (froms[0].endswith(" AS env") and froms[1:] == ["env AS uv", "env"])
    base = froms[0].removesuffix(" AS env")
    assert base.startswith(stack["base"]["image"]) and " " not in base
    if stack["base"]["digest"]:
        assert base.endswith("@" + stack["base"]["digest"]), "pinned by digest when known"

    users = [a for k, a in ins if k == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "runs as non-root"

    for k, a in ins:
        if k == "COPY":
            assert not SECRET_FILE.search(a), f"COPY of a secret-looking file: {a}"
        if k in ("ENV", "ARG"):
            names = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", a) or [a.split()[0]]
            assert not any(SECRET_NAME.search(n) for n in names), f"{k} {a}"

    # Each pip layer installs one rendered requirements file, exact pins only, each with
    # its sha256 where the closure has one, --no-deps: what is installed is the closure.
    closure = json.loads((d / "closure.json").read_text())
    locked = {p["name"]: p for p in closure["packages"]}
    pins = {n: v for n, v in stack["packages"].items()
            if n not in stack["base"]["provides"]}
    layers, installed = [], {}
    for k, a in ins:
        if k == "RUN" and is_pip(a):
            opts = pip_args(a)
            assert {"--no-deps", "--only-binary=:all:"} <= set(opts), a
            source = re.search(r"--mount=type=bind,source=install/([\w-]+),", a).group(1)
            reqs = read_requirements(d / "install" / source / "requirements.txt")
            hashed = all(locked[n]["hashes"] for n in reqs)
            assert ("--require-hashes" in opts) == hashed, a
            for n, (version, hashes) in reqs.items():
                assert version == locked[n]["version"]
                assert [f"sha256:{h}" for h in hashes] == locked[n]["hashes"]
                if n in pins and pins[n][:1] not in "<>=!~":
                    assert Version(version) == Version(pins[n]), \
                        f"{n} {version} is not the matrix's pin"
            installed.update(reqs)
            layers.append(source)
    assert set(installed) == {n for n in locked if n not in stack["base"]["provides"]}, \
        "every distribution of the closure is installed, nothing else"
    assert set(pins) <= set(installed), "every package of the stack is in the closure"
    assert layers == sorted(layers) and len(set(layers)) == len(layers), layers
    copy_at = next(i for i, (k, a) in enumerate(ins)
                   if k == "RUN" and f"{stack['smoke']}_smoke.py" in a)
    last_pip = max(i for i, (k, a) in enumerate(ins) if k == "RUN" and is_pip(a))
    assert last_pip < copy_at, "the payload comes after every pip layer"
    assert keywords.index("USER") < copy_at < len(keywords) - 1


def test_forward_compat_render_uses_a_cuda_compat_base(rendered):
    d = rendered["pytorch-cu130--driver-535.274.02--gpu-H100"]
    stack = json.loads((d / "stack.json").read_text())
    assert stack["forward_compat"] is True and stack["base"]["cuda_compat"] is True
    text = (d / "Dockerfile").read_text()
    assert f"FROM {stack['base']['image']}" in text   # NVIDIA's image, cuda-compat inside
    # the compat libcuda is the Container Toolkit's to mount, where the host's driver is
    # older: first on LD_LIBRARY_PATH it would stop CUDA on a newer driver (error 803)
    assert "LD_LIBRARY_PATH" not in text and "cuda/compat:" not in text
    assert "LD_LIBRARY_PATH" not in (d / "apptainer.def").read_text()
    assert "brand=tesla,driver>=535,driver<536" in text


def test_index_render_names_the_index_everywhere(rendered):
    d = rendered["torch==2.3.1--driver-520.61.05"]
    files = [d / "requirements.txt", *sorted(d.glob("install/*/requirements.txt"))]
    assert len(files) >= 3
    for f in files:
        assert "--index-url https://download.pytorch.org/whl/cu118" in f.read_text(), f


def _run_instructions(dockerfile: str) -> list[str]:
    """Every RUN of a Dockerfile, its continued lines joined, comments dropped."""
    lines = [line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [line for line in joined.splitlines() if line.startswith("RUN ")]


def _pipes(command: str) -> list[str]:
    """The `|` of a shell command outside quotes that join two commands (not `||`)."""
    bare = re.sub(r"'[^']*'|\"(?:[^\"\\\\]|\\\\.)*\"", "''", command)
    return re.findall(r"(?<!\|)\|(?!\|)", bare)


def test_no_rendered_run_hides_a_failure_in_a_pipe():
    """hadolint DL4006: sh has no pipefail, so `a | b` fails only when b does; every RUN of
    every golden Dockerfile does without pipes, or says `set -o pipefail` first."""
    found = []
    for dockerfile in sorted(GOLDEN.glob("*/Dockerfile")):
        for run in _run_instructions(dockerfile.read_text()):
            if _pipes(run) and "set -o pipefail" not in run:
                found.append(f"{dockerfile.parent.name}: {run[:120]}")
    assert not found, "\n".join(found[:5])


def test_a_build_argument_in_a_label_never_reaches_apptainer():
    """Apptainer 1.2+ fills {{ word }} anywhere in a definition file but its comments: a
    project's smoke command holding one failed `apptainer build` (or changed the label)."""
    import json

    import pytest

    from envgen.render.env import labelvalue
    smoke = {"smoke": ["python", "-c", "print(string.Template('{{ HOME }}'))"]}
    text = labelvalue(smoke)
    assert "{{" not in text and json.loads(text) == smoke
    with pytest.raises(ValueError, match="refusing '{{'"):
        labelvalue("a {{ HOME }} label")
