"""The JAX reader's pins, on an index made in the test: a CUDA variant installs the
libraries of the CUDA release it names (NVIDIA's cuda-toolkit wheel of that release says
which), and the one Flax/optax pin of a row installs on every Python the row lists."""
from __future__ import annotations

from pathlib import Path

import yaml

from envgen.refresh import jax
from envgen.refresh.change import compare_platform_wheels, compare_releases
from envgen.refresh.pypi import Run

ROOT = Path(__file__).resolve().parents[1]


class Index:
    """Projects of wheels: name -> [(version, tags, requires_python, METADATA lines)]."""

    def __init__(self, projects: dict[str, list[tuple]]):
        self.pages, self.texts = {}, {}
        for name, wheels in projects.items():
            files = []
            for version, tags, requires_python, lines in wheels:
                fn = f"{name.replace('-', '_')}-{version}-{tags}.whl"
                files.append({"filename": fn, "url": f"http://127.0.0.1:9/{fn}",
                              "hashes": {"sha256": "0" * 64},
                              **({"requires-python": requires_python}
                                 if requires_python else {})})
                self.texts[fn] = "\n".join(["Metadata-Version: 2.1", f"Name: {name}",
                                            f"Version: {version}", *lines]) + "\n"
            self.pages[name] = {"files": files}

    def project(self, name):
        return self.pages[name]

    def metadata(self, f):
        return self.texts[f["filename"]], "pep658"


PLUGIN = "cp312-cp312-manylinux_2_27_x86_64"
ANY = "py3-none-any"
LINUX = "py3-none-manylinux_2_27_x86_64"


def _toolkit(version, cublas, cudart, cccl):
    return (version, "py2.py3-none-any", None, [
        "Provides-Extra: all",
        f"Requires-Dist: nvidia-cublas=={cublas}.*; sys_platform == 'linux' and extra == 'all'",
        f"Requires-Dist: nvidia-cuda-runtime=={cudart}.*; extra == 'all'",
        f"Requires-Dist: nvidia-cuda-cccl=={cccl}.*; extra == 'all'"])


def _index(plugin_cublas=">=13.0", toolkits=True):
    return Index({
        "jax-cuda13-plugin": [("0.8.0", PLUGIN, ">=3.11", [
            "Provides-Extra: with-cuda",
            f"Requires-Dist: nvidia-cublas{plugin_cublas}; extra == 'with-cuda'",
            "Requires-Dist: nvidia-cuda-runtime>=13.0; extra == 'with-cuda'",
            "Requires-Dist: nvidia-nvshmem-cu13>=3; extra == 'with-cuda'",
            "Requires-Dist: jax-cuda13-pjrt==0.8.0"])],
        "jax-cuda13-pjrt": [("0.8.0", LINUX, None, [])],
        "nvidia-cublas": [("13.8.0.4", LINUX, None, []), ("13.10.0.20", LINUX, None, [])],
        "nvidia-cuda-runtime": [("13.4.92", LINUX, None, []), ("13.5.37", LINUX, None, [])],
        # not a toolkit component, but it needs one: CCCL
        "nvidia-nvshmem-cu13": [("3.8.0", LINUX, None, ["Requires-Dist: nvidia-cuda-cccl"])],
        "nvidia-cuda-cccl": [("13.3.4.3.1", LINUX, None, []), ("13.3.5.0.6", LINUX, None, [])],
        "cuda-toolkit": [_toolkit("13.4.3", "13.8.0.4", "13.4.92", "13.3.4.3.1"),
                         _toolkit("13.5.0", "13.10.0.20", "13.5.37", "13.3.5.0.6")]
        if toolkits else [],
    })


def _variant(index):
    run = Run(index=index, folder=ROOT / "matrices")
    doc = {"cuda": [{"version": "13.4.3", "runtime": "13.4.92",
                     "compute_capabilities": ["8.0", "9.0"]}]}
    plugin = jax.releases(index.project("jax-cuda13-plugin"))[jax.Version("0.8.0")]
    v = jax._variant(run, jax.Version("0.8.0"), "13", plugin, ["3.12"],
                     {"13.4.92": ["13.4.3"]}, doc, {}, jax.toolkit_pins(run))
    return run, v


def test_a_cuda_variant_installs_the_libraries_of_the_release_it_names():
    """The plugin asks for nvidia-cublas>=13.0; the matrix knows CUDA 13.4.3 (cudart
    13.4.92), not 13.5: cuBLAS is 13.4.3's (13.8.0.4), not 13.5's newer 13.10.0.20, and the
    refresh may take the old pin back (a correction, not a version going backwards)."""
    run, v = _variant(_index())
    assert v["cuda"] == "13.4.3"
    assert v["packages"]["nvidia-cublas"] == "13.8.0.4"
    assert v["packages"]["nvidia-cuda-runtime"] == "13.4.92"
    # what a pinned wheel requires in turn, the toolkit's too (else the closure takes 13.5's)
    assert v["packages"]["nvidia-cuda-cccl"] == "13.3.4.3.1"
    assert "components as cuda-toolkit 13.4.3 pins them" in v["why"]
    assert run.corrections == {("jax 0.8.0 cuda13", "packages.nvidia-cublas", "13.10.0.20"),
                               ("jax 0.8.0 cuda13", "packages.nvidia-cuda-cccl", "13.3.5.0.6")}
    # the refresh's check lets exactly that value go back
    old = [{"framework": "jax", "version": "0.8.0", "variants": [
        {"name": "cuda13", "packages": {"nvidia-cublas": "13.10.0.20"}}]}]
    new = [{"framework": "jax", "version": "0.8.0", "variants": [
        {"name": "cuda13", "packages": {"nvidia-cublas": "13.8.0.4"}}]}]
    assert compare_releases(old, new, frozenset(run.corrections)).refusals == []
    assert compare_releases(old, new).refusals == [
        "jax 0.8.0 cuda13: packages.nvidia-cublas would go backwards, 13.10.0.20 -> 13.8.0.4"]


def test_a_plugin_range_the_toolkit_pin_misses_keeps_the_plugins_and_says_so():
    run, v = _variant(_index(plugin_cublas=">=13.9"))
    assert v["packages"]["nvidia-cublas"] == "13.10.0.20"
    assert "but nvidia-cublas 13.10.0.20 (the plugin's range)" in v["why"]
    assert ("jax 0.8.0 cuda13", "packages.nvidia-cublas", "13.10.0.20") not in run.corrections


def test_without_a_toolkit_wheel_the_components_are_the_newest_and_the_run_says_so(
        monkeypatch):
    run, v = _variant(_index(toolkits=False))
    assert v["packages"]["nvidia-cublas"] == "13.10.0.20"
    assert "no cuda-toolkit 13.4.3 wheel" in v["why"]
    assert any("has no cuda-toolkit 13.4.3 wheel" in w for w in run.warnings)


def _flax(version, requires_python, jax_spec, stated=True):
    lines = [f"Requires-Dist: jax{jax_spec}"]
    if stated:
        lines.append(f"Requires-Python: {requires_python}")
    return (version, ANY, requires_python if stated != "metadata-only" else None, lines)


def test_a_companion_installs_on_every_python_of_its_row():
    """flax 0.10.4 admits jax 0.4.30 but not Python 3.9, which jax 0.4.30 supports: the row
    pins 0.8.5, and the older pin is a correction of the 0.10.4 the reader took before."""
    index = Index({"flax": [_flax("0.12.0", ">=3.11", ">=0.7"),
                            _flax("0.10.4", ">=3.10", ">=0.4.27"),
                            _flax("0.8.5", ">=3.9", ">=0.4.20")]})
    run = Run(index=index)
    got = jax._companion(run, "flax", jax.Version("0.4.30"), ["3.9", "3.10", "3.11", "3.12"])
    assert got[0] == "0.8.5"
    assert run.corrections == {("jax 0.4.30", "companions.flax", "0.10.4")}
    run = Run(index=index)
    got = jax._companion(run, "flax", jax.Version("0.4.30"), ["3.10", "3.11", "3.12"])
    assert got[0] == "0.10.4" and run.corrections == set()


def test_a_companion_whose_metadata_alone_states_its_python_is_read_from_it():
    index = Index({"flax": [_flax("0.10.4", ">=3.10", ">=0.4.27", stated="metadata-only"),
                            _flax("0.8.5", ">=3.9", ">=0.4.20")]})
    got = jax._companion(Run(index=index), "flax", jax.Version("0.4.30"), ["3.9", "3.12"])
    assert got[0] == "0.8.5"


def test_jax_platform_rows_follow_their_variants_pins_and_others_are_checked():
    old = [{"package": "jax", "version": "0.8.0", "platform": "linux/arm64",
            "variant": "cuda13", "packages": {"nvidia-cublas": "13.10.0.20"}},
           {"package": "torch", "version": "2.11.0", "platform": "linux/arm64",
            "variant": "cu130", "packages": {"nvidia-cublas": "13.1.0.3"}}]
    new = [{**old[0], "packages": {"nvidia-cublas": "13.8.0.4"}},
           {**old[1], "packages": {"nvidia-cublas": "13.0.0.19"}}]
    ch = compare_platform_wheels(old, new, frozenset({"jax"}))
    assert ch.refusals == ["torch 2.11.0 linux/arm64 cu130: packages.nvidia-cublas would go "
                           "backwards, 13.1.0.3 -> 13.0.0.19"]
    assert any(c.startswith("jax 0.8.0 linux/arm64 cuda13: packages follow") for c in ch.changed)
    assert len(compare_platform_wheels(old, new).refusals) == 2


def test_tensorflows_arm64_cpu_rows_say_the_cpu_build_is_inferred():
    doc = yaml.safe_load((ROOT / "matrices" / "platforms.yaml").read_text())
    rows = [r for r in doc["platform_wheels"] if r["package"] == "tensorflow"]
    assert rows and all(r["variant"] == "cpu" for r in rows)
    assert all(r.get("confidence") == "inferred" and "no GPU code" in r["why"] for r in rows)


JAX_0_4_37 = "\n".join([
    "Metadata-Version: 2.1", "Name: jax", "Version: 0.4.37",
    "Requires-Dist: jaxlib<=0.4.37,>=0.4.36",
    'Requires-Dist: jaxlib==0.4.36; extra == "cuda12"',
    'Requires-Dist: jax-cuda12-plugin[with_cuda]<=0.4.37,>=0.4.36; extra == "cuda12"',
    'Requires-Dist: jaxlib==0.4.35; extra == "ci"', ""])


def test_jaxlib_and_the_plugin_are_what_jaxs_metadata_installs():
    """jax 0.4.37 has no jaxlib 0.4.37: `pip install jax[cuda12]==0.4.37` takes jaxlib and
    the plugin 0.4.36, and the matrix holds the release (it used to leave it out)."""
    lib, plugin = jax._extra_pins(JAX_0_4_37, "jax 0.4.37", "12")
    wheels = {jax.Version(v): [{"linux_x86_64": True, "python": "3.12", "build": ()}]
              for v in ("0.4.35", "0.4.36", "0.4.38")}
    assert jax._newest(wheels, lib, jax.Version("0.4.37")) == jax.Version("0.4.36")
    assert jax._newest(wheels, plugin, jax.Version("0.4.37")) == jax.Version("0.4.36")
    cpu, none = jax._extra_pins(JAX_0_4_37, "jax 0.4.37", None)
    assert jax._newest(wheels, cpu, jax.Version("0.4.37")) == jax.Version("0.4.36")
    assert none is None
    # an open range never reaches past the release itself; no range at all gives nothing
    assert jax._newest(wheels, jax.SpecifierSet(">=0.4.14"), jax.Version("0.4.36")) == \
        jax.Version("0.4.36")
    assert jax._newest(wheels, None, jax.Version("0.4.36")) is None
    doc = yaml.safe_load((ROOT / "matrices" / "jax.yaml").read_text())
    rows = {r["version"]: r for r in doc["framework_releases"]}
    libs = {(v, x["name"]): x["packages"]["jaxlib"] for v in ("0.4.35", "0.4.37", "0.5.2")
            for x in rows[v]["variants"]}
    assert libs == {("0.4.35", "cuda12"): "0.4.34", ("0.4.35", "cpu"): "0.4.35",
                    ("0.4.37", "cuda12"): "0.4.36", ("0.4.37", "cpu"): "0.4.36",
                    ("0.5.2", "cuda12"): "0.5.1", ("0.5.2", "cpu"): "0.5.1"}
