"""Readers for the frameworks installed over PyTorch's stack (Lightning, Transformers,
Accelerate, DeepSpeed, NeMo's speech collection): one matrix file each, from the index and
each release's wheel METADATA.

Every final release first uploaded on or after SINCE (2023-01-01), from the framework's floor
line where one is given with its reason (NeMo): the version, the month of its first upload,
Requires-Python and the CPython versions it admits, and the ranges it states for torch and
for the other frameworks it needs (Transformers' `torch` extra names Accelerate). These are
pure-Python wheels (`py3-none-any`): a release without one is refused."""
from __future__ import annotations

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from .licenses import license_of
from .pypi import (
    Refused,
    Run,
    best_wheels,
    classifier_pythons,
    needs_in,
    releases,
    requirements,
    sdist_releases,
)

PYTHONS = tuple(f"3.{n}" for n in range(8, 15))   # the CPython lines the matrix knows
# every final release first uploaded on this day or later (issue 27: what teams pin)
SINCE = "2023-01-01"

# name: (package, first minor line (None: every release since SINCE), the extra that carries
# its torch requirement, docs)
ADDONS = {
    "lightning": ("lightning", None, None,
                  "https://lightning.ai/docs/pytorch/stable/versioning.html"),
    # the same trainer under its older distribution and import name (pytorch_lightning)
    "pytorch-lightning": ("pytorch-lightning", None, None,
                          "https://lightning.ai/docs/pytorch/stable/versioning.html"),
    "transformers": ("transformers", None, "torch",
                     "https://huggingface.co/docs/transformers/installation"),
    "accelerate": ("accelerate", None, None,
                   "https://huggingface.co/docs/accelerate/basic_tutorials/install"),
    "deepspeed": ("deepspeed", None, None,
                  "https://www.deepspeed.ai/tutorials/advanced-install/"),
    # From 2.6.1: the first release whose [asr] closure needs no compiler (2.5.3 and 2.6.0
    # pin ctc_segmentation==1.7.4 in their asr extra, a Cython extension PyPI serves as an
    # sdist alone: 2.6.0's closure found no wheel for it, 2026-12-05), and the first line to
    # state torch>=2.6.0. Its lightning range sits in the asr extra.
    "nemo": ("nemo-toolkit", "2.6.1", "asr",
             "https://docs.nvidia.com/nemo-framework/user-guide/latest/installation.html"),
    # over TensorFlow: Keras (2.x is TensorFlow's own; 3.x runs over TensorFlow, JAX or
    # PyTorch) and tf-keras (Keras 2 for TensorFlow 2.16 and later)
    "keras": ("keras", None, None, "https://keras.io/getting_started/"),
    "tf-keras": ("tf-keras", None, None, "https://github.com/keras-team/tf-keras"),
    # over JAX: Flax and optax (their METADATA states the jax range)
    "flax": ("flax", None, None, "https://flax.readthedocs.io/en/latest/"),
    "optax": ("optax", None, None, "https://optax.readthedocs.io/en/latest/"),
}
# The framework an add-on is installed over (pytorch where not named), and each base's package
BUILDS_ON = {"keras": "tensorflow", "tf-keras": "tensorflow", "flax": "jax", "optax": "jax"}
BASE_PACKAGE = {"pytorch": "torch", "tensorflow": "tensorflow", "jax": "jax"}
# Add-ons whose own METADATA states no range of the base package, while each base release's
# METADATA states the range of the add-on it installs: TensorFlow's Requires-Dist names Keras
# (tensorflow 2.15.1: keras<2.16,>=2.15.0; 2.16.1: keras>=3.0.0; 2.20.0: keras>=3.10.0).
# The add-on release's base range is then the base releases whose range admits it.
RANGE_FROM_BASE = {"keras"}
# The environment a stack sets for an add-on, per base it is installed over, with the source:
# Keras 3 picks its backend from KERAS_BACKEND (tensorflow unless set); Keras 2 reads the
# same variable and runs over TensorFlow alone.
# Other frameworks an add-on may be installed over besides its BUILDS_ON one, for which of its
# releases: Keras 3 runs over JAX or PyTorch as well as TensorFlow (keras.io: "Keras 3 ...
# can run on top of JAX, TensorFlow, or PyTorch"); Keras 2 over TensorFlow alone. Keras 3's
# METADATA names no backend, so any release of those frameworks admits it.
ALSO_OVER = {"keras": {"frameworks": ["jax", "pytorch"], "releases": ">=3",
                       "source": "https://keras.io/getting_started/"}}
# tf-keras: TensorFlow 2.16 and later make tf.keras Keras 3 unless TF_USE_LEGACY_KERAS=1,
# which makes it tf-keras (older TensorFlow ignores it).
ENV = {"keras": {"variable": "KERAS_BACKEND",
                 "values": {"tensorflow": "tensorflow", "jax": "jax", "pytorch": "torch"},
                 "source": "https://keras.io/getting_started/#configuring-your-backend"},
       "tf-keras": {"variable": "TF_USE_LEGACY_KERAS", "values": {"tensorflow": "1"},
                    "source": "https://keras.io/getting_started/#tensorflow--keras-2-backwards-compatibility"}}
# Add-ons whose image installs an extra of their package: the reader reads Requires-Dist
# with it, the closure resolves `package[extra]==V`. NeMo: the speech collection only; its
# cu12/cu13/compiled extras name builds PyPI does not serve (pip then backtracks silently
# to an old NeMo), so envgen pins the version and installs none of them.
EXTRAS = {
    "nemo": {"name": "asr", "source": "pypi:nemo-toolkit/nemo_toolkit-3.0.0-py3-none-any.whl"},
}
# Pins of the base stack's closure an add-on's own requirements exclude: its closure resolves
# them anew, in its own layer, over the base's CUDA libraries. NeMo's [asr] caps lightning at
# 2.4.0, whose Requires-Dist says fsspec[http]<2026.0; torch's closures pin fsspec 2026.9.0.
# Lightning 2.3 (the last line over torch 2.0, so lightning-cu117's) says packaging<25.0;
# the cu117 torch closure pins packaging 26.4, which made that stack's closure unsolvable.
UNPIN = {
    "nemo": {"packages": ["fsspec"], "source": "pypi:lightning/lightning-2.4.0-py3-none-any.whl"},
    "lightning": {"packages": ["packaging"],
                  "source": "pypi:lightning/lightning-2.3.3-py3-none-any.whl"},
}
# Add-ons PyPI serves for Linux only as source distributions: pip builds them in the image,
# without build isolation (so the build sees the stack's torch), with these variables.
# DeepSpeed: DS_BUILD_OPS=0 compiles no C++/CUDA op at install; its ops are built just in
# time where a payload asks for one (FusedAdam, CPUAdam), which the smoke payload does not.
# `packages`: where they are dependencies of a wheel rather than its own package. NeMo 2.6
# and later need antlr4-python3-runtime 4.9.3 (through hydra-core) and, to 2.7, wget 3.2:
# pure-Python packages PyPI serves as sdists alone (pypi:antlr4-python3-runtime/
# antlr4-python3-runtime-4.9.3.tar.gz, pypi:wget/wget-3.2.zip).
SOURCE_BUILDS = {
    "deepspeed": {"env": {"DS_BUILD_OPS": "0"},
                  "source": "https://www.deepspeed.ai/tutorials/advanced-install/"},
    "nemo": {"packages": ["antlr4-python3-runtime", "wget"],
             "source": "pypi:antlr4-python3-runtime/antlr4-python3-runtime-4.9.3.tar.gz"},
}

# Python patch releases a release's code needs that its Requires-Python does not state:
# read from the release's own source, so inferred, and the row says why. NeMo 3.0 restores
# a .nemo file through nemo/utils/tar_utils.py, which calls TarFile.extract(...,
# filter="data"): PEP 706's extraction filters, in Python 3.12 and backported to 3.11.4,
# 3.10.12, 3.9.17 and 3.8.17 (docs.python.org/3/whatsnew/3.11.html, "Notable changes in
# 3.11.4"); before them the call is a TypeError (Debian bookworm's 3.11.2 has none).
# Not in nemo-toolkit 2.6.2 or 2.7.3 (their wheels hold no such call).
PYTHON_FLOORS = {
    "nemo": [(">=3.0", ("3.8.17", "3.9.17", "3.10.12", "3.11.4"),
              "inferred: nemo/utils/tar_utils.py calls TarFile.extract(filter='data'), PEP "
              "706, in Python 3.12 and backported to 3.11.4 and 3.10.12")],
}


# What a release's code needs that its Requires-Dist does not state, read from its source
# (inferred): resolved in the add-ons' layer as if stated. Lightning 2.2 and 2.3 end
# lightning/fabric/__init__.py with __import__("pkg_resources").declare_namespace(__name__),
# and setuptools 82.0.0 removed pkg_resources (its changelog, "Deprecations and Removals");
# the newest setuptools made `import lightning` fail in lightning-cu117's image. Not in 2.4.
# Transformers 5.14 imports DTensor from torch.distributed.tensor whenever torch.distributed
# is available (core_model_loading.py, distributed/sharding_utils.py); to 5.13 that import
# sat behind is_torch_greater_or_equal("2.5"), and 5.15 states torch>=2.5 itself. DTensor is
# public there from torch 2.5. 5.14.1 still states torch>=2.4: transformers-cu121 over
# torch 2.4.1 failed certification with "cannot import name 'DTensor'" (2026-12-02).
NEEDS = {
    # lightning 2.0 states lightning-cloud>=0.5.31 (2.0.9: >=0.5.38) with no cap, imports
    # lightning.app at `import lightning`, and that imports AppinstancesIdBody from
    # lightning_cloud.openapi, which lightning-cloud 0.6.0 no longer has (0.5.70 does: read
    # from both wheels). lightning 2.0.0 over torch 2.0.1 failed certification on it
    # (2026-12-03); 2.1.0 states lightning-cloud==0.5.39, in its app extras only.
    "lightning": [("<2.1", {"setuptools": "<82", "lightning-cloud": "<0.6"},
                   "inferred: lightning/fabric/__init__.py imports pkg_resources, which "
                   "setuptools 82.0.0 removed, and `import lightning` imports "
                   "AppinstancesIdBody from lightning_cloud.openapi, gone in lightning-cloud "
                   "0.6.0 (2.0.0's import failed on it in certification, 2026-12-03)"),
                  ("<2.4", {"setuptools": "<82"},
                   "inferred: lightning/fabric/__init__.py imports pkg_resources, which "
                   "setuptools 82.0.0 removed")],
    # seen in certification: pytorch-lightning 2.0.9 over torch 2.4.1 (2026-12-03) failed
    # `import pytorch_lightning` with "No module named 'pkg_resources'" under setuptools 82
    "pytorch-lightning": [("<2.4", {"setuptools": "<82"},
                           "inferred: pytorch-lightning 2.0.9's import failed with No module "
                           "named 'pkg_resources' (certification, 2026-12-03), which "
                           "setuptools 82.0.0 removed; lightning <2.4 has the same need")],
    # accelerate to 0.20.3 imports pkg_resources in accelerate/utils/torch_xla.py (read from
    # the wheels: 0.21.0 is the first without it); 0.16.0 over torch 2.0.1 failed `import
    # accelerate` with "No module named 'pkg_resources'" under setuptools 82 (2026-12-03)
    "accelerate": [("<0.21", {"setuptools": "<82"},
                    "inferred: accelerate/utils/torch_xla.py imports pkg_resources, which "
                    "setuptools 82.0.0 removed (0.16.0's import failed on it in "
                    "certification, 2026-12-03; 0.21.0 is the first release without it)")],
    "transformers": [(">=4.50,<4.52", {"torch": ">=2.1"},
                      "inferred: modeling_utils.py imports integrations/flex_attention.py, "
                      "whose module-level @torch.compiler.disable needs torch.compiler, public "
                      "from torch 2.1 (4.51.3 over torch 2.0.1 failed certification: module "
                      "'torch' has no attribute 'compiler')"),
                     ("==5.14.*", {"torch": ">=2.5"},
                      "inferred: core_model_loading.py imports DTensor from "
                      "torch.distributed.tensor with no torch version guard, public from "
                      "torch 2.5")],
    "nemo": [("<2.6.2", {"torch": ">=2.6"},
              "inferred: 2.6.0 and 2.6.1 state torch without a range, while 2.6.2, the next "
              "patch of the same line, states torch>=2.6.0 in its asr extra")],
    # tf-keras 2.14.1 and 2.15.0 state no tensorflow requirement at all; from 2.15.1 each
    # release states the tensorflow minor line of its own version (2.15.1: tensorflow<2.16,
    # >=2.15; 2.16.0: tensorflow<2.17,>=2.16)
    "tf-keras": [(which, {"tensorflow": f">={line},<{upto}"},
                  f"inferred: tf-keras {which[2:]} states no tensorflow requirement, while "
                  f"every release from 2.15.1 states the tensorflow minor line of its own "
                  f"version (2.15.1: tensorflow<2.16,>=2.15)")
                 for which, line, upto in (("==2.14.*", "2.14", "2.15"),
                                           ("==2.15.0", "2.15", "2.16"))],
    # seen in certification (2026-12-05): flax 0.6.4 failed `import flax` over jax 0.12.0.1
    # and over jax 0.4.30 ("'Config' object has no attribute 'define_bool_state'"). Read from
    # the wheels: every flax before 0.8.0 calls jax.config.define_bool_state
    # (flax/configurations.py); jax's Config has the method to 0.4.19, forwards it from
    # _CONFIG_DEPRECATIONS through __getattr__ in 0.4.20 to 0.4.24, and has neither in 0.4.25.
    # Then over jax 0.4.24, "cannot import name 'linear_util' from 'jax'": flax before 0.7.5
    # imports jax.linear_util (flax/core/axes_scan.py), which jax 0.4.24 no longer has.
    # And over jax 0.4.23: flax 0.6.4 "module 'jax.experimental.pjit' has no attribute
    # 'PartitionSpec'" (flax/core/meta.py), 0.6.6 "cannot import name 'ShapedArray' from
    # 'jax'"; `import flax` over jax 0.4.23 fails the same way to 0.6.8 and passes from 0.6.9
    # (tried natively, 2026-12-05). No jax the matrix holds (0.4.18 on) exports ShapedArray
    # at the top level (jax/__init__.py), so flax before 0.6.9 is refused with this reason.
    "flax": [("<0.6.9", {"jax": "<0.4.18"},
              "inferred: flax before 0.6.9 imports names jax no longer exports (ShapedArray "
              "from jax, jax.experimental.pjit.PartitionSpec), absent from every jax the "
              "matrix holds (0.4.18 on): 0.6.4's and 0.6.6's imports over jax 0.4.23 failed "
              "on them in certification, 2026-12-05"),
             ("<0.7.5", {"jax": "<0.4.24"},
              "inferred: flax before 0.7.5 imports jax.linear_util (flax/core/axes_scan.py), "
              "gone from jax 0.4.24, and flax before 0.8 calls jax.config.define_bool_state, "
              "gone from 0.4.25 (0.6.4's import failed on each in certification, 2026-12-05)"),
             ("<0.8", {"jax": "<0.4.25"},
              "inferred: flax/configurations.py of every release before 0.8.0 calls "
              "jax.config.define_bool_state, which jax 0.4.25 removed (jax/_src/config.py; "
              "0.6.4's import over jax 0.4.30 failed on it in certification, 2026-12-05)")],
    # seen in certification (2026-12-05): keras 3.0.0 over jax failed `import keras` with
    # "No module named 'packaging'" (3.4.0 is the first whose METADATA requires it; over
    # TensorFlow, tensorflow's own requirements bring it), and then its Model.fit over jax
    # 0.12.0.1 with "module 'jax' has no attribute 'spmd_mode'". Read from the wheels: keras
    # before 3.10.0 calls jax.spmd_mode in keras/src/backend/jax/trainer.py; jax/__init__.py
    # exports it to 0.6.0 and not from 0.6.1. A jax range limits a jax base alone.
    "keras": [(">=3.0,<3.4", {"packaging": ">=0", "jax": "<0.6.1"},
               "inferred: keras 3.0 to 3.3 import packaging without requiring it, and keras "
               "before 3.10 calls jax.spmd_mode in its jax trainer, which jax 0.6.1 removed "
               "(3.0.0 over jax failed on both in certification, 2026-12-05)"),
              (">=3.4,<3.10", {"jax": "<0.6.1"},
               "inferred: keras before 3.10 calls jax.spmd_mode in its jax trainer "
               "(keras/src/backend/jax/trainer.py), which jax 0.6.1 removed (3.0.0's fit over "
               "jax 0.12.0.1 failed on it in certification, 2026-12-05)")],
    # DeepSpeed builds its ops with torch.utils.cpp_extension (setup.py, and JIT at run time)
    "deepspeed": [(">=0.18", {"torch": ">=2.2"},
                   "inferred: runtime/zero/muon/original_muon.py applies torch.compile when "
                   "imported, which torch 2.0 refuses on Python 3.11+ (0.19.8 over torch 2.0.1 "
                   "failed certification on it), and torch 2.1's cpp_extension imports "
                   "pkg_resources, gone in setuptools 82: torch 2.2 is the first with neither"),
                  ("==0.17.*", {"torch": ">=2.2"},
                   "inferred: 0.17.6's ZeRO-2 training over torch 2.0.1 raised IndexError in "
                   "stage_1_and_2.reduce_ipg_grads (no gradient buffer; seen in certification, "
                   "cause not read) while 0.16.9 trains over it, and torch 2.1's cpp_extension "
                   "imports pkg_resources, gone in setuptools 82"),
                  ("<0.17", {"setuptools": "<82"},
                   "inferred: torch.utils.cpp_extension of torch before 2.2 imports "
                   "pkg_resources, which setuptools 82.0.0 removed (pytorch/pytorch#113023 "
                   "replaced it; deepspeed-cu117's build over torch 2.0.1 failed on it)", "<2.2")],
}


def needs(name: str, version: Version) -> dict:
    """The needs fields of a release row (NEEDS; a fourth item is the torch range over which
    they apply)."""
    return needs_in(NEEDS.get(name, ()), version)


def python_floors(name: str, version: Version, pythons: list[str]) -> dict:
    """The python_floors fields of a release row (PYTHON_FLOORS), for the lines it admits."""
    for spec, floors, why in PYTHON_FLOORS.get(name, ()):
        if SpecifierSet(spec).contains(version, prereleases=True):
            kept = [f for f in floors if f.rsplit(".", 1)[0] in pythons]
            return {"python_floors": kept, "python_floors_why": why} if kept else {}
    return {}


def own_sdist(name: str) -> bool:
    """Whether the add-on's own package is built from its sdist (no Linux wheel)."""
    return name in SOURCE_BUILDS and "packages" not in SOURCE_BUILDS[name]


# one trainer under two names: lightning's wheels require pytorch-lightning (the same code
# under its older import name); a row does not keep that as a framework requirement
SAME = {"lightning": "pytorch-lightning"}

def base_of(name: str) -> str:
    """The framework the add-on `name` is installed over."""
    return BUILDS_ON.get(name, "pytorch")


def kept(name: str) -> set[str]:
    """Packages whose ranges a release row of `name` keeps: its base framework's and those of
    the add-ons over the same base."""
    base = base_of(name)
    return {BASE_PACKAGE[base], *(pkg for n, (pkg, *_) in ADDONS.items() if base_of(n) == base)}


def _unmet(run: Run, reqs, package: str, keep: set) -> str | None:
    """The first requirement of a release that no file on the index satisfies (a release can
    name a dependency newer than the index serves): its row would resolve to a stack whose
    closure cannot be built. The framework's and add-ons' own ranges are the matrix's job."""
    for r in reqs:
        key = canonicalize_name(r.name)
        if key in keep or key == package:
            continue
        try:
            versions = _versions(run.index, key)
        except Refused:
            return f"{r}, and the index has no project {key}"
        if not any(r.specifier.contains(v, prereleases=True) for v in versions):
            newest = max(versions, default=None)
            return (f"{r}, and the index serves {key} "
                    + (f"up to {newest}" if newest else "in no version"))
    return None


def _versions(index, key: str) -> set:
    """Every version of `key` the index serves a file of (not yanked), once per index."""
    memo = index.__dict__.setdefault("_versions", {})
    if key not in memo:
        page = index.project(key)
        versions = set()
        for f in page["files"]:
            if f.get("yanked"):
                continue
            try:
                if f["filename"].endswith(".whl"):
                    versions.add(parse_wheel_filename(f["filename"])[1])
                else:
                    versions.add(parse_sdist_filename(f["filename"])[1])
            except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
                continue
        memo[key] = versions
    return memo[key]


def base_ranges(run: Run, name: str) -> list[tuple[Version, SpecifierSet]]:
    """(base release, the range of `name` its METADATA states) for each final base release
    first uploaded since SINCE with a Linux x86_64 wheel (RANGE_FROM_BASE)."""
    base = BASE_PACKAGE[base_of(name)]
    package = ADDONS[name][0]
    files = releases(run.index.project(base))
    out = []

    def one(ver):
        best = best_wheels(files[ver])
        if not best:
            return None
        python = max(best, key=Version)
        text, _how = run.index.metadata(best[python])
        req = next((r for r in requirements(text, python, f"{base} {ver}")
                    if canonicalize_name(r.name) == package), None)
        return (ver, req.specifier) if req is not None else None
    out = [r for r in rows_of(run, since(files, None), one) if r]
    return out


def range_of(ver: Version, ranges) -> str | None:
    """The base releases whose stated range admits `ver`, as a specifier: from the first
    to before the next one that does not, skipping any between that do not; None: none."""
    ordered = sorted(ranges)
    ok = [b for b, spec in ordered if spec.contains(ver, prereleases=True)]
    if not ok:
        return None
    after = [b for b, _ in ordered if b > ok[-1]]
    gaps = [b for b, spec in ordered if ok[0] < b < ok[-1] and b not in ok]
    return ",".join([f">={ok[0]}", *([f"<{after[0]}"] if after else []),
                     *(f"!={b}" for b in gaps)])


def release_row(run: Run, name: str, ver: Version, files: list[dict],
                ranges=None) -> dict | None:
    package, _, extra, _ = ADDONS[name]
    what = f"{package} {ver}"
    keep = kept(name)
    base = BASE_PACKAGE[base_of(name)]
    if own_sdist(name):
        wheel = files[0]             # its sdist: PKG-INFO holds the same fields
        text = run.index.sdist_metadata(wheel)
    else:
        pure = [f for f in files if f["pure"]]
        if not pure:
            raise Refused(f"{what}: no py3-none-any wheel on the index")
        wheel = pure[0]
        text, _how = run.index.metadata(wheel)
    reqs = requirements(text, "3.12", what, frozenset({extra}) if extra else frozenset())
    requires: dict[str, str] = {}
    for r in reqs:
        key = canonicalize_name(r.name)
        if key in keep and key not in (package, SAME.get(name)) and (r.marker is None or extra):
            spec = str(r.specifier)
            if key in requires and requires[key] != spec:
                spec = str(SpecifierSet(requires[key]) & r.specifier)
            requires[key] = spec or ">=0"
    if ranges is not None:
        over = range_of(ver, ranges)
        if over is None:
            run.warn(f"{what} left out: no {base} release since {SINCE} states a {package} "
                     f"range that admits it")
            return None
        requires[base] = over
    if base not in requires and own_sdist(name):
        # an sdist whose PKG-INFO and requirements/requirements.txt state no torch range:
        # nothing to resolve against
        run.warn(f"{what} left out: its PKG-INFO states no requirements (no torch range "
                 f"to resolve against)")
        return None
    if base not in requires and needs(name, ver).get("needs", {}).get(base):
        pass   # a base range its code needs, though its METADATA states none (NEEDS)
    elif base not in requires:
        raise Refused(f"{what}: its METADATA states no {base} requirement"
                      + (f" (looked in the {extra!r} extra too)" if extra else ""))
    rp = wheel.get("requires-python")
    try:
        allowed = SpecifierSet(rp) if rp else SpecifierSet()
    except InvalidSpecifier:
        raise Refused(f"{what}: its Requires-Python {rp[:60]!r} does not parse") from None
    pythons = [p for p in PYTHONS if allowed.contains(p)]
    if not rp and own_sdist(name):
        # no Requires-Python: the lines its classifiers name are the ones it states
        pythons = [p for p in classifier_pythons(text) if p in pythons]
    if not pythons:
        raise Refused(f"{what}: Requires-Python {rp} admits none of {', '.join(PYTHONS)}")
    # last: it reads an index page per dependency, and a malformed release is refused first
    unmet = _unmet(run, reqs, package, keep)
    if unmet:
        run.warn(f"{what} left out: it requires {unmet}")
        return None
    license, why = license_of(text)
    if license is None:
        run.warn(f"{what}: no license written ({wheel['filename']}: {why})")
    uploaded = min((f.get("upload-time") or "") for f in files)
    return {"framework": name, "version": str(ver), "released": uploaded[:7] or None,
            "pythons": pythons, "requires_python": rp,
            **python_floors(name, ver, pythons), **needs(name, ver),
            "requires": dict(sorted(requires.items())),
            **({"license": license} if license else {}),
            "source": f"pypi:{package}/{wheel['filename']}"}


# the payload that certifies an add-on, where it is another's: lightning_smoke imports
# pytorch_lightning where the `lightning` package is absent
# (keras_smoke, flax_smoke, optax_smoke run their base's training and compare the add-on's
# version; tf-keras is tf.keras where TF_USE_LEGACY_KERAS=1, so keras_smoke reads it)
SMOKE = {"pytorch-lightning": "lightning", "tf-keras": "keras"}


def since(files: dict, first: str | None) -> list:
    """The versions of `files` (version -> file entries) first uploaded on SINCE or later,
    from the floor line `first` on where one is given; oldest first."""
    floor = Version(first) if first else None
    out = []
    for v, fs in files.items():
        uploaded = min((f.get("upload-time") or "") for f in fs) if fs else ""
        if uploaded[:10] >= SINCE and (floor is None or v >= floor):
            out.append(v)
    return sorted(out)


def rows_of(run: Run, chosen: list, one) -> list[dict]:
    """`one(version)` for each chosen version, on run.jobs threads (each reads its own
    METADATA, through the index's cache); in version order, warnings sorted."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, run.jobs)) as pool:
        rows = [r for r in pool.map(one, chosen) if r]
    run.warnings.sort()
    return rows


def reader(name: str):
    """The reader object `envgen matrix refresh NAME` runs for one add-on framework."""
    package, first, _, docs = ADDONS[name]
    which = (f"each final {package} release uploaded since {SINCE}"
             + (f", from {first} on" if first else ""))
    base = BASE_PACKAGE[base_of(name)]
    stated = (f"the {base} range: the {base}\n# releases whose own METADATA states a "
              f"{package} range that admits it" if name in RANGE_FROM_BASE else
              f"the {base} and add-on ranges of Requires-Dist")

    class Reader:
        FILE = f"{name}.yaml"
        HEADER = (f"# GENERATED by `envgen matrix refresh {name}` -- do not edit by hand; "
                  f"rerun it.\n# Each row: {which}, read "
                  f"from PyPI's JSON simple index and\n# the wheel's METADATA (Requires-Python, "
                  f"{stated},\n# the SPDX licence). "
                  f"`pythons` are the CPython lines Requires-Python admits; the\n# wheels are "
                  f"py3-none-any.\n") if not own_sdist(name) else (
                  f"# GENERATED by `envgen matrix refresh {name}` -- do not edit by hand; "
                  f"rerun it.\n# Each row: {which}, read "
                  f"from PyPI's JSON simple index and\n# the sdist's PKG-INFO (the torch range "
                  f"of Requires-Dist, the licence). PyPI has no\n# Linux wheel of it: pip builds "
                  f"the sdist in the image (`from_source`). It states no\n# Requires-Python: "
                  f"`pythons` are the lines its classifiers name.\n")

        @staticmethod
        def derive(run: Run) -> dict:
            page = run.index.project(package)
            if own_sdist(name):
                files = {v: [f] for v, f in sdist_releases(page).items()}
            else:
                files = releases(page)
            chosen = since(files, first)
            if not chosen:
                raise Refused(f"{package}: the index lists no release since {SINCE}")
            ranges = base_ranges(run, name) if name in RANGE_FROM_BASE else None
            rows = rows_of(run, chosen, lambda v: release_row(run, name, v, files[v], ranges))
            if not rows:
                raise Refused(f"{package}: every release was left out: "
                              f"{'; '.join(run.warnings)[:400]}")
            entry = {"name": name, "package": package, "builds_on": base_of(name),
                     "smoke": SMOKE.get(name, name), "source": docs}
            if name in SOURCE_BUILDS:
                entry["from_source"] = SOURCE_BUILDS[name]
            if name in EXTRAS:
                entry["extra"] = EXTRAS[name]
            if name in UNPIN:
                entry["unpin"] = UNPIN[name]
            if name in ALSO_OVER:
                entry["also_over"] = ALSO_OVER[name]
            if name in ENV:
                entry["env"] = ENV[name]
            return {"frameworks": [entry], "framework_releases": rows}
    return Reader
