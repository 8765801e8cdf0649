"""CI files from data: a GitHub Actions workflow and a docker-bake.json. Rendered with
yaml/json dumpers, never string templates, so every value is quoted correctly.

The workflow builds and certifies each stack once on a hosted CPU runner and pushes it by
digest; the GPU runner pulls that very image (verify checks its ID) and certifies it on the
GPU; the per-stack locks merge into envgen.lock. A pull request verifies the committed lock
on a hosted runner: pulling by digest needs no GPU. envgen itself is installed from a source
the team controls, pinned by commit or by hash, never by a bare name from PyPI."""
from __future__ import annotations

import importlib.metadata
import json
import re
import shlex
import subprocess
import urllib.parse
from pathlib import Path

import yaml
from packaging.version import InvalidVersion, Version

from .. import DISTRIBUTION
from ..core.errors import InputError, shown
from ..core.image import default_tag, parse_repository
from ..core.model import Stack
from ..resolve.closure import CA_BUNDLE
from .views import image_labels

DEFAULT_STACKS = ("pytorch-cu121", "pytorch-cu126", "pytorch-cu128")
GPU_RUNNER = ("self-hosted", "gpu")
_RUNNER_LABEL = re.compile(r"[A-Za-z0-9._-]{1,256}")
CONTEXT_ROOT = "envgen-contexts"
DIST_NAME = DISTRIBUTION
# The one GitHub expression --registry may carry. The owner is lowercased in a step, since
# GitHub owners may have capitals and registries refuse them.
DEFAULT_REGISTRY = "ghcr.io/${{ github.repository_owner }}/envgen"
_DEFAULT_REPOSITORY_RUN = ('echo "ENVGEN_REPOSITORY=ghcr.io/${GITHUB_REPOSITORY_OWNER,,}/envgen"'
                           ' >> "$GITHUB_ENV"')

_GIT_SOURCE = re.compile(r"git\+https://[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?(?::[0-9]{1,5})?"
                         r"(?:/[A-Za-z0-9._~-]+)+@(?P<commit>[0-9a-f]{40})")
_HASHED_SOURCE = re.compile(rf"{DIST_NAME}==(?P<version>[0-9A-Za-z.+!_-]+)"
                            r"(?: --hash=sha256:[0-9a-f]{64})+")
# The release by version alone, from the package index: what a wheel install of envgen
# knows of itself (it records no commit and no hash), accepted with a warning.
_VERSION_SOURCE = re.compile(rf"{DIST_NAME}==(?P<version>[0-9A-Za-z.+!_-]+)")
_SOURCE_FORMS = (f"git+https://HOST/PATH@<40-hex commit>, "
                 f"'{DIST_NAME}==VERSION --hash=sha256:<64 hex>' or {DIST_NAME}==VERSION")

# Every action runs by the commit of its current release, not by a tag that can be moved;
# the tag follows as a comment (`uses: OWNER/REPO@<commit> # vX.Y.Z`). Each commit is
# `git rev-parse TAG^{commit}` in the action's own repository on GitHub (read 2026-12-03;
# the major tag named the same commit): actions/checkout v7.0.1 (2026-07-17),
# actions/setup-python v7.0.0 (2026-07-19), actions/upload-artifact v7.0.0 (2026-02-25),
# actions/download-artifact v8.0.1 (2026-03-11), docker/login-action v4.1.0 (2026-04-02),
# peter-evans/create-pull-request v8.1.1 (2026-04-10). Every one runs on Node 24, so a
# self-hosted runner needs Actions Runner 2.327.1 or newer. To move one, read the new tag's
# commit the same way and change its row.
ACTIONS = {   # action: (commit, release tag)
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "actions/download-artifact": ("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    "docker/login-action": ("4907a6ddec9925e35a0a9e82d7399ccc52663121", "v4.1.0"),
    "peter-evans/create-pull-request": ("5f6978faf089d4d20b00c7766989d076bb2fc7f1", "v8.1.1"),
}


def _pinned(action: str) -> str:
    return f"{action}@{ACTIONS[action][0]}"


CHECKOUT = _pinned("actions/checkout")
SETUP_PYTHON = _pinned("actions/setup-python")
UPLOAD_ARTIFACT = _pinned("actions/upload-artifact")
DOWNLOAD_ARTIFACT = _pinned("actions/download-artifact")
DOCKER_LOGIN = _pinned("docker/login-action")
CREATE_PULL_REQUEST = _pinned("peter-evans/create-pull-request")
# No job pushes with git after checking out (create-pull-request brings its own token), so
# the token is not left in .git/config for later steps to read or an artifact to carry.
CHECKOUT_STEP = {"uses": CHECKOUT, "with": {"persist-credentials": False}}
_USES = re.compile(r"^(\s*(?:- )?uses: ([\w.-]+/[\w.-]+)@([0-9a-f]{40}))$", re.MULTILINE)


def dump_workflow(workflow: dict) -> str:
    """`workflow` as YAML (no anchors, keys in order), each pinned action followed by its
    release tag as a comment."""
    text = yaml.dump(workflow, Dumper=_NoAliases, sort_keys=False, width=1000,
                     default_flow_style=False)

    def tagged(m: re.Match) -> str:
        commit, tag = ACTIONS.get(m[2], (None, None))
        return f"{m[1]} # {tag}" if commit == m[3] else m[1]
    return _USES.sub(tagged, text)


def default_specs(stack_names: list[str]) -> list[str]:
    chosen = [s for s in DEFAULT_STACKS if s in stack_names]
    return chosen or list(stack_names)


# ---- where CI installs envgen from --------------------------------------------------------

def parse_envgen_source(text: object) -> str:
    """`text` when it is a pinned envgen source (a git commit over https, the distribution at
    one version with its sha256, or at one version alone), else InputError. It reaches a
    `run:` line, so anything else, a shell metacharacter included, is refused here rather
    than quoted."""
    from ..core.logins import has_login, refusal
    if isinstance(text, str) and has_login(text):
        raise InputError(refusal("the envgen source", text))
    shown = repr(text if not isinstance(text, str) or len(text) <= 80 else text[:77] + "...")
    if isinstance(text, str) and _GIT_SOURCE.fullmatch(text):
        return text
    m = isinstance(text, str) and (_HASHED_SOURCE.fullmatch(text)
                                   or _VERSION_SOURCE.fullmatch(text))
    if m:
        try:
            Version(m["version"])
            return text
        except InvalidVersion:
            raise InputError(f"the envgen source {shown} names {m['version']!r}, which is "
                             f"not a version") from None
    raise InputError(f"the envgen source {shown} is not pinned the way CI needs it: give "
                     f"{_SOURCE_FORMS}")


def _public_https(url: object) -> str | None:
    """An https URL for a git remote, or None: scp-like (git@host:path) and ssh:// remotes
    become https on the same host and path; credentials, query and fragment are dropped
    (a token must never reach a workflow file)."""
    if not isinstance(url, str):
        return None
    url = url.strip().removeprefix("git+")
    if scp := re.fullmatch(r"[\w.-]+@([\w.-]+):(?!//)/?(.+)", url):
        return f"https://{scp[1]}/{scp[2].rstrip('/')}"
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port if parts.scheme == "https" else None
    except ValueError:
        return None
    if parts.scheme not in ("https", "ssh") or not parts.hostname:
        return None
    return f"https://{parts.hostname}{f':{port}' if port else ''}{parts.path.rstrip('/')}"


def _pinned_or_none(url: object, commit: object) -> str | None:
    https = _public_https(url)
    if https is None or not isinstance(commit, str):
        return None
    try:
        return parse_envgen_source(f"git+{https}@{commit}")
    except InputError:
        return None


def _from_direct_url() -> str | None:
    """The git commit this envgen was installed from (PEP 610's direct_url.json), when the
    installed distribution is the code running now."""
    try:
        dist = importlib.metadata.distribution(DIST_NAME)
        if Path(dist.locate_file("envgen/__init__.py")).resolve() != \
                Path(__file__).resolve().parents[1] / "__init__.py":
            return None
        info = json.loads(dist.read_text("direct_url.json") or "null")
    except (importlib.metadata.PackageNotFoundError, OSError, ValueError):
        return None
    vcs = info.get("vcs_info") if isinstance(info, dict) else None
    if not isinstance(vcs, dict) or vcs.get("vcs") != "git":
        return None
    return _pinned_or_none(info.get("url"), vcs.get("commit_id"))


def _git(root: Path, *args: str) -> str | None:
    try:
        r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _from_checkout() -> str | None:
    """HEAD of the git checkout envgen runs from, when nothing in it differs from HEAD and
    HEAD is on a branch of `origin` (so CI can fetch it)."""
    root = Path(__file__).resolve().parents[2]
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root:
        return None
    if _git(root, "status", "--porcelain") != "":
        return None
    if not _git(root, "for-each-ref", "--contains", "HEAD", "--format=%(refname)",
                "refs/remotes/origin"):
        return None
    return _pinned_or_none(_git(root, "remote", "get-url", "origin"),
                           _git(root, "rev-parse", "--verify", "HEAD"))


def default_envgen_source() -> str | None:
    """`git+URL@commit` for the envgen running now, or None when it has no such pin."""
    return _from_direct_url() or _from_checkout()


def pick_envgen_source(given: str | None) -> str:
    """The validated `given` source, else the running envgen's own commit, else its release
    by version (`by_version_only` says so, for a warning)."""
    if given is not None:
        return parse_envgen_source(given)
    from .. import __version__
    return default_envgen_source() or parse_envgen_source(f"{DIST_NAME}=={__version__}")


def by_version_only(source: str) -> str | None:
    """A warning when `source` pins envgen by version alone (the index could serve other
    bytes under it), else None."""
    m = _VERSION_SOURCE.fullmatch(source)
    if m is None:
        return None
    return (f"CI installs {source} from the package index, pinned by version only (this "
            f"envgen was not installed from a git commit, nor does it run from a clean "
            f"checkout pushed to origin); pin the bytes with --envgen-source "
            f"'{source} --hash=sha256:<the wheel's sha256>' or git+https://HOST/PATH@COMMIT")


def _install_run(source: str) -> str:
    if source.startswith("git+") or _VERSION_SOURCE.fullmatch(source):
        return f"python -m pip install {shlex.quote(source)}"
    # pip reads --hash only from a requirements file; in hash mode it wants every dependency
    # hashed too, so envgen is checked alone and its dependencies follow by name.
    req = '"$RUNNER_TEMP/envgen-requirements.txt"'
    return (f"printf '%s\\n' {shlex.quote(source)} > {req}"
            f" && python -m pip install --no-deps --require-hashes -r {req}"
            f" && python -m pip install {shlex.quote(source.split()[0])}")


# ---- the registry -------------------------------------------------------------------------

def _repository(registry: str | None) -> str | None:
    """The validated repository envgen pushes to, or None for DEFAULT_REGISTRY (the job
    computes that one)."""
    if registry is None or registry == DEFAULT_REGISTRY:
        return None
    if "${{" in registry:
        raise InputError(f"the registry {shown(registry)} carries a GitHub expression; the only "
                         f"one allowed is the default, {DEFAULT_REGISTRY!r}")
    return parse_repository(registry)


def _host(repository: str | None) -> str | None:
    """The registry host docker logs in to; None for Docker Hub (docker's rule: the first
    component names a host only when it looks like one)."""
    if repository is None:
        return "ghcr.io"
    first, slash, _ = repository.partition("/")
    return first if slash and (first == "localhost" or any(c in first for c in ".:")) else None


def _login(host: str | None) -> dict:
    if host == "ghcr.io":
        creds = {"username": "${{ github.actor }}", "password": "${{ secrets.GITHUB_TOKEN }}"}
    else:
        creds = {"username": "${{ secrets.ENVGEN_REGISTRY_USER }}",
                 "password": "${{ secrets.ENVGEN_REGISTRY_PASSWORD }}"}
    return {"name": "Log in to the registry", "uses": DOCKER_LOGIN,
            "with": {**({"registry": host} if host else {}), **creds}}


# ---- the GPU runner -----------------------------------------------------------------------

def gpu_runner_labels(given: object) -> list[str]:
    """The `runs-on` labels of the GPU job: GPU_RUNNER when `given` is None, else every
    label of `given` (a string or a list of them, each possibly comma-separated), in order,
    once. A label reaches the YAML as it is, so anything but a plain label is refused."""
    if given is None:
        return list(GPU_RUNNER)
    items = [given] if isinstance(given, str) else given
    if not isinstance(items, (list, tuple)) or not items:
        raise InputError("--gpu-runner needs a runner label, e.g. --gpu-runner self-hosted,gpu")
    labels: list[str] = []
    for item in items:
        for label in item.split(",") if isinstance(item, str) else [item]:
            if not isinstance(label, str) or not _RUNNER_LABEL.fullmatch(label):
                raise InputError(f"--gpu-runner {shown(label, 60)} is not a plain runner label "
                                 f"(letters, digits, '.', '_' and '-', at most 256)")
            if label not in labels:
                labels.append(label)
    return labels


# ---- the workflow -------------------------------------------------------------------------

class _NoAliases(yaml.SafeDumper):
    """safe_dump without &anchors/*aliases for repeated values: plain YAML for any reader."""

    def ignore_aliases(self, data):
        return True


def _when(condition: str, step: dict) -> dict:
    """`step` run only when `condition` holds; `if` right after the name, as people write it."""
    head = {"name": step["name"]} if "name" in step else {}
    return {**head, "if": condition, **step}


def _keys(specs: list[str]) -> list[str]:
    """A file- and artifact-safe name per spec (`torch>=2.4` has characters neither takes)."""
    out: list[str] = []
    for spec in specs:
        key = re.sub(r"[^A-Za-z0-9._-]+", "-", spec).strip("-.") or "stack"
        base, n = key, 2
        while key in out:
            key, n = f"{base}-{n}", n + 1
        out.append(key)
    return out


# Prints the image of the one stack in a per-stack lock; a value that is not
# repository@sha256:<hex> (a newline, say) never reaches $GITHUB_ENV.
_READ_PINNED = ('import json, re, sys; (e,) = json.load(open(sys.argv[1]))["stacks"].values(); '
                'p = str(e["image"]["pinned"]); '
                'print(p) if re.fullmatch(r"[^\\s@]+@sha256:[0-9a-f]{64}", p) '
                'else sys.exit("no image pinned by digest in " + sys.argv[1])')


# The build job keeps envgen's files (build logs, certificates, contexts) in the runner's
# temporary folder, so the log a failed build leaves has a path the upload step can name.
_HOME_RUN = 'echo "ENVGEN_HOME=$RUNNER_TEMP/envgen" >> "$GITHUB_ENV"'
_BUILD_LOGS = "${{ runner.temp }}/envgen/logs/"


def github_workflow(specs: list[str], envgen_source: str | None = None,
                    registry: str | None = None, gpu_runner: object = None,
                    matrix: str | None = None) -> str:
    """The workflow for `specs`. `envgen_source` is validated (None: the running envgen's own
    pin); `registry` is the repository images are pushed to (None: DEFAULT_REGISTRY);
    `gpu_runner` the GPU job's runner labels (None: GPU_RUNNER; see gpu_runner_labels);
    `matrix` the repository's matrix folder every envgen step reads through ENVGEN_MATRIX
    (None: the bundled matrix), so every job checks it out."""
    runner = gpu_runner_labels(gpu_runner)
    folder = matrix_folder(matrix) if matrix is not None else None
    # the GPU and lock jobs need no checkout but to read the repository's matrix
    own_checkout = [CHECKOUT_STEP] if folder else []
    install = {"name": "Install envgen (pinned)",
               "run": _install_run(pick_envgen_source(envgen_source))}
    repository = _repository(registry)
    host = _host(repository)
    ghcr = host == "ghcr.io"
    python = {"uses": SETUP_PYTHON, "with": {"python-version": "3.11"}}
    checkout = CHECKOUT_STEP
    login = _login(host)
    not_on_pr = "github.event_name != 'pull_request'"
    keys = _keys(specs)
    include = [{"stack": s, "key": k} for s, k in zip(specs, keys, strict=True)]
    strategy = {"fail-fast": False, "matrix": {"stack": list(specs), "include": include}}
    per_stack = {"ENVGEN_STACK": "${{ matrix.stack }}", "ENVGEN_KEY": "${{ matrix.key }}"}
    lock_file = '"envgen-$ENVGEN_KEY.lock"'
    upload = {"uses": UPLOAD_ARTIFACT,
              "with": {"path": "envgen-${{ matrix.key }}.lock", "if-no-files-found": "error"}}
    pull = {"permissions": {"contents": "read", "packages": "read"}} if ghcr else {}

    build = {
        "name": "build ${{ matrix.stack }}, certify on the CPU, push",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 120,
        **({"permissions": {"contents": "read", "packages": "write"}} if ghcr else {}),
        "strategy": strategy,
        "env": per_stack,
        "steps": [
            checkout, python, install,
            {"name": "envgen's files in the job's temporary folder", "run": _HOME_RUN},
            {"name": "mmdebstrap (envgen's local Debian bases)",
             "run": "sudo apt-get update -q && sudo apt-get install -y -q mmdebstrap"},
            {"name": "Build and certify on the CPU",
             "run": 'envgen build "$ENVGEN_STACK" --certify --gpus none --json'},
            _when("failure()", {   # right after the build: only its failure uploads it
                "name": "Upload the build log", "uses": UPLOAD_ARTIFACT,
                "with": {"name": "envgen-build-log-${{ matrix.key }}", "path": _BUILD_LOGS,
                         "if-no-files-found": "ignore"}}),
            *([_when(not_on_pr, {"name": "Repository (the owner in lowercase)",
                                 "run": _DEFAULT_REPOSITORY_RUN})] if repository is None else []),
            _when(not_on_pr, login),
            _when(not_on_pr, {
                "name": "Push by digest and lock",
                "run": f'envgen lock "$ENVGEN_STACK" --push "$ENVGEN_REPOSITORY" -o {lock_file}'
                       f" --json"}),
            _when(not_on_pr, {**upload, "with": {"name": "envgen-cpu-${{ matrix.key }}",
                                                 **upload["with"]}}),
        ],
    }
    certify_gpu = {
        "name": "certify ${{ matrix.stack }} on a GPU",
        "needs": "build",
        "if": not_on_pr,   # never run a pull request's code on the self-hosted runner
        "runs-on": runner,
        "timeout-minutes": 60,
        **pull,
        "strategy": {**strategy, "max-parallel": 1},
        "env": per_stack,
        "steps": [
            *own_checkout, python, install, login,
            {"uses": DOWNLOAD_ARTIFACT, "with": {"name": "envgen-cpu-${{ matrix.key }}"}},
            # the build job's lock carries its CPU pass: the GPU run is what comes next
            {"name": "Verify: pull by digest, check image ID, CPU certificate and closure",
             "run": f"envgen verify {lock_file} --level cpu --json"},
            {"name": "The pinned image",
             "run": f"image=$(python -c {shlex.quote(_READ_PINNED)} {lock_file})"
                    ' && echo "ENVGEN_IMAGE=$image" >> "$GITHUB_ENV"'},
            {"name": "Certify on every GPU",
             "run": 'envgen certify "$ENVGEN_IMAGE" --gpus all --json'},
            {"name": "Lock the GPU certificate",
             "run": f'envgen lock "$ENVGEN_IMAGE" -o {lock_file} --json'},
            {"name": "Verify the GPU lock",
             "run": f"envgen verify {lock_file} --json"},
            {**upload, "with": {"name": "envgen-gpu-${{ matrix.key }}", **upload["with"]}},
        ],
    }
    lock = {
        "name": "merge the per-stack locks into envgen.lock",
        "needs": "certify-gpu",
        "if": not_on_pr,
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 15,
        "steps": [
            *own_checkout, python, install,
            {"uses": DOWNLOAD_ARTIFACT,
             "with": {"pattern": "envgen-gpu-*", "path": "locks", "merge-multiple": True}},
            {"name": "Merge", "run": "envgen lock --merge locks/envgen-*.lock -o envgen.lock"
                                     " --json"},
            {"uses": UPLOAD_ARTIFACT,
             "with": {"name": "envgen.lock", "path": "envgen.lock",
                      "if-no-files-found": "error"}},
        ],
    }
    has_lock = "hashFiles('envgen.lock') != ''"
    # A fork's pull request gets no secrets, and the login action fails without them: such
    # a run pulls anonymously. The job token (ghcr.io) is there for every pull request.
    login_if = has_lock if ghcr else (f"{has_lock} && (github.event_name != 'pull_request' "
                                      f"|| github.event.pull_request.head.repo.fork == false)")
    verify = {
        "name": "verify the committed envgen.lock",
        "runs-on": "ubuntu-latest",   # pulls by digest: no GPU, no self-hosted runner
        "timeout-minutes": 60,
        **pull,
        "steps": [
            checkout,
            _when(has_lock, python), _when(has_lock, install), _when(login_if, login),
            _when(has_lock, {"name": "Verify the committed lock",
                             "run": "envgen verify envgen.lock --json"}),
        ],
    }
    env = {**({"ENVGEN_REPOSITORY": repository} if repository else {}),
           **({"ENVGEN_MATRIX": folder} if folder else {})}
    workflow = {
        "name": "envgen",
        "on": {"push": {"branches": ["main"]}, "pull_request": {}, "workflow_dispatch": {}},
        "permissions": {"contents": "read"},
        # One run per branch or pull request at a time; a newer push to a pull request
        # cancels the run it supersedes, while a push to main waits for the one before it
        # (an interrupted push or lock would leave a half-certified set).
        "concurrency": {"group": "${{ github.workflow }}-${{ github.ref }}",
                        "cancel-in-progress": "${{ github.event_name == 'pull_request' }}"},
        **({"env": env} if env else {}),
        "defaults": {"run": {"shell": "bash"}},
        "jobs": {"build": build, "certify-gpu": certify_gpu, "lock": lock, "verify": verify},
    }
    return dump_workflow(workflow)


def _literal(text: str) -> str:
    """`text` as bake reads it back unchanged: bake takes every string of its file as an
    HCL template, so a project's smoke command holding `${...}` or `%{...}` in a label
    would be filled in from the CI's environment (or break the file). HCL's own escapes:
    `$${` and `%%{`."""
    return text.replace("${", "$${").replace("%{", "%%{")


def bake(stacks: list[Stack], base_refs: dict[str, str] | None = None) -> str:
    """docker-bake.json: one target per stack, built from `envgen render STACK -o
    ${ENVGEN_CONTEXTS}/STACK`; group "default" holds them all."""
    targets = {}
    for st in stacks:
        ref = (base_refs or {}).get(st.stack) or st.base.reference
        targets[st.stack] = {
            "context": f"${{ENVGEN_CONTEXTS}}/{st.stack}",
            "dockerfile": "Dockerfile",
            "tags": [_literal(default_tag(st))],
            "labels": {_literal(k): _literal(v) for k, v in image_labels(st, ref)},
            "secret": [f"id=ca,src={CA_BUNDLE}"],
        }
    doc = {"variable": {"ENVGEN_CONTEXTS": {"default": CONTEXT_ROOT}},
           "group": {"default": {"targets": list(targets)}},
           "target": targets}
    return json.dumps(doc, indent=2) + "\n"


# ---- the scheduled matrix refresh ---------------------------------------------------------

_MATRIX_FOLDER = re.compile(r"(?:[A-Za-z0-9_][A-Za-z0-9._-]*/)*[A-Za-z0-9_][A-Za-z0-9._-]*")
REFRESH_BRANCH = "envgen/matrix-refresh"


def matrix_folder(text: object) -> str:
    """A repository-relative folder name safe on a `run:` line, or InputError."""
    if not isinstance(text, str) or len(text) > 200 or not _MATRIX_FOLDER.fullmatch(text) \
            or any(part in (".", "..") for part in text.split("/")):
        raise InputError(f"the matrix {str(text)[:60]!r} (--matrix or ENVGEN_MATRIX) must be a "
                         f"relative path inside the repository (letters, digits, . _ - /) for "
                         f"a workflow: its jobs read it from their checkout")
    return text


def refresh_workflow(envgen_source: str | None = None, folder: str = "matrices") -> str:
    """A weekly workflow: `envgen matrix refresh` (the framework files, then the closures)
    on the repository's matrix folder; a change becomes a pull request whose body is the
    refresh's own summary. A refusal (a release would vanish, a pin would go backwards)
    fails the run and writes nothing."""
    folder = matrix_folder(folder)
    install = {"name": "Install envgen (pinned)",
               "run": _install_run(pick_envgen_source(envgen_source))}
    text, summary = '"$RUNNER_TEMP/envgen-refresh.txt"', '"$RUNNER_TEMP/envgen-refresh.md"'
    refresh = {
        "name": "envgen matrix refresh",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 30,
        "permissions": {"contents": "write", "pull-requests": "write"},
        "steps": [
            CHECKOUT_STEP,
            {"uses": SETUP_PYTHON, "with": {"python-version": "3.11"}},
            install,
            {"name": "Refresh the matrix and the closures",
             "run": f"envgen --matrix {shlex.quote(folder)} matrix refresh > {text}"
                    f" && {{ echo '## envgen matrix refresh'; echo; echo '```'; cat {text};"
                    f" echo '```'; }} > {summary} && cat {summary}"},
            {"name": "Validate the refreshed matrix",
             "run": f"envgen --matrix {shlex.quote(folder)} matrix validate"},
            {"name": "Open or update the pull request",
             "uses": CREATE_PULL_REQUEST,
             "with": {"branch": REFRESH_BRANCH, "delete-branch": True,
                      "add-paths": f"{folder}/**",
                      "commit-message": "matrix: refresh from the package index",
                      "title": "matrix: refresh from the package index",
                      "body-path": "${{ runner.temp }}/envgen-refresh.md"}},
        ],
    }
    workflow = {
        "name": "envgen matrix refresh",
        "on": {"schedule": [{"cron": "23 5 * * 1"}], "workflow_dispatch": {}},
        "permissions": {"contents": "read"},
        # One group for the whole workflow, not per ref: every run, from any ref, pushes the
        # same pull-request branch. A run is never cancelled halfway through its push.
        "concurrency": {"group": "envgen-matrix-refresh", "cancel-in-progress": False},
        "defaults": {"run": {"shell": "bash"}},
        "jobs": {"refresh": refresh},
    }
    return dump_workflow(workflow)
