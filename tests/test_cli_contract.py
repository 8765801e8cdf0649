"""The CLI contract of design.md that other tools rely on: JSON keys, exit codes, one-line
errors without tracebacks. Runs `envgen.cli.main` in-process against the bundled matrix."""
from __future__ import annotations

import json

import pytest

from envgen.cli import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv: str):
    """The exit code and the --json document, whose schema version is checked here for
    every command the tests run with --json."""
    rc, out, _err = run(capsys, *argv, "--json")
    doc = json.loads(out)
    assert isinstance(doc, dict) and doc.pop("schema_version") == 1, out[:200]
    return rc, doc


# ---- resolve ------------------------------------------------------------------------------

def test_resolve_json_has_every_key_design_md_lists(capsys):
    rc, d = run_json(capsys, "resolve", "pytorch-cu121")
    assert rc == 0
    assert d["stack"] == "pytorch-cu121"
    assert {"name", "version"} <= set(d["framework"])
    assert isinstance(d["packages"], dict) and d["packages"]
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in d["packages"].items())
    for key in ("python", "cuda", "cudnn", "nccl", "require_cuda"):
        assert isinstance(d[key], str), key
    assert {"image", "kind"} <= set(d["base"])
    assert "index_url" in d and d["index_url"] is None  # PyPI
    assert set(d["driver"]) >= {"minimum", "toolkit"}
    assert isinstance(d["compute_capabilities"], list) and d["compute_capabilities"]
    assert isinstance(d["reasons"], list) and d["reasons"]
    assert all(isinstance(r, str) and r for r in d["reasons"])


def test_resolve_index_stack_names_its_index_url(capsys):
    rc, d = run_json(capsys, "resolve", "pytorch-cu121", "--sources", "index")
    assert rc == 0
    assert d["index_url"] == "https://download.pytorch.org/whl/cu121"


def test_resolve_human_output_names_the_stack(capsys):
    rc, out, _err = run(capsys, "resolve", "pytorch-cu121")
    assert rc == 0 and out.startswith("pytorch-cu121: torch ")


def test_resolve_human_output_prints_valid_requirements(capsys):
    rc, out, _err = run(capsys, "resolve", "pytorch-cu130")
    assert rc == 0
    assert "====" not in out and "==<" not in out


def test_impossible_spec_exits_2_with_nearest_specs(capsys):
    rc, d = run_json(capsys, "resolve", "torch==2.6.0", "--gpu", "RTX 5090")
    assert rc == 2
    assert d["exit_code"] == 2 and d["hints"]
    assert "12.0" in d["message"]


# ---- matrix -------------------------------------------------------------------------------

def test_matrix_list_json_is_a_row_per_stack(capsys):
    rc, d = run_json(capsys, "matrix", "list")
    rows = d["stacks"]
    assert rc == 0 and isinstance(rows, list) and len(rows) >= 7
    frameworks = ("pytorch", "lightning", "transformers", "accelerate", "jax",
                  "tensorflow", "deepspeed", "nemo")
    for r in rows:
        assert r["stack"].split("-")[0] in frameworks
        assert "error" in r or {"version", "python", "cuda", "source"} <= set(r)
    assert {"pytorch-cu121", "pytorch-cu118", "pytorch-cpu", "lightning-cu128",
            "transformers-cu128", "accelerate-cu121", "tensorflow-cu125",
            "tensorflow-cpu"} <= {r["stack"] for r in rows}


def test_matrix_show_gpus_json(capsys):
    rc, d = run_json(capsys, "matrix", "show", "gpus")
    rows = d["rows"]
    assert rc == 0 and d["section"] == "gpus"
    names = {r["name"] for r in rows}
    assert {"H100", "RTX 4090", "RTX 5090"} <= names
    assert all({"name", "cc", "class"} <= set(r) for r in rows)


def test_matrix_validate_json(capsys):
    rc, d = run_json(capsys, "matrix", "validate")
    assert rc == 0 and d["valid"] is True
    assert len(d["sha256"]) == 64
    assert d["counts"]["framework_releases"] > 0


# ---- require-cuda -------------------------------------------------------------------------

def test_require_cuda_12_0_runs_on_r535(capsys):
    rc, out, _err = run(capsys, "require-cuda", "check", "cuda>=12.0", "--driver", "535.104.05")
    assert rc == 0 and out.startswith("yes")


def test_require_cuda_12_4_fails_on_r535_naming_the_clause(capsys):
    rc, out, _err = run(capsys, "require-cuda", "check", "cuda>=12.4", "--driver", "535.104.05")
    assert rc == 1 and "cuda>=12.4" in out
    rc, d = run_json(capsys, "require-cuda", "check", "cuda>=12.4", "--driver", "535.104.05")
    assert rc == 1 and d["ok"] is False and "cuda>=12.4" in d["clause"]


def test_require_cuda_disabled_by_nvidia_disable_require(capsys):
    rc, _out, _err = run(capsys, "require-cuda", "check", "cuda>=12.4", "--driver", "535.104.05",
                       "--env", "NVIDIA_DISABLE_REQUIRE=true")
    assert rc == 0


@pytest.mark.parametrize("brand,driver,ok", [
    ("tesla", "535.104.05", True),      # the brand alternative holds
    ("geforce", "535.104.05", False),   # wrong brand: neither alternative holds
    ("tesla", "536.10.01", False),      # driver outside the branch window
    ("geforce", "580.65.06", True),     # the cuda alternative holds on its own
])
def test_require_cuda_space_is_or_comma_is_and(capsys, brand, driver, ok):
    rc, d = run_json(capsys, "require-cuda", "check",
                     "cuda>=13.0 brand=tesla,driver>=535,driver<536", "--driver", driver,
                     "--brand", brand)
    assert (rc, d["ok"]) == ((0, True) if ok else (1, False))


def test_require_cuda_every_variable_must_hold(capsys):
    argv = ("require-cuda", "check", "cuda>=12.0", "--driver", "535.104.05",
            "--env", "NVIDIA_REQUIRE_ARCH=arch>=9.0")
    rc, d = run_json(capsys, *argv, "--arch", "8.6")
    assert rc == 1 and "NVIDIA_REQUIRE_ARCH" in d["clause"]
    rc, d = run_json(capsys, *argv, "--arch", "9.0")
    assert rc == 0


def test_require_cuda_empty_requirement_is_not_a_traceback(capsys):
    rc, _out, _err = run(capsys, "require-cuda", "check", "", "--driver", "535.104.05")
    assert rc in (0, 2)


def test_require_cuda_bad_cuda_flag_exits_2(capsys):
    rc, _out, _err = run(capsys, "require-cuda", "check", "cuda>=12.0", "--driver", "535.104.05",
                       "--cuda", "twelve")
    assert rc == 2


# ---- bad flags ----------------------------------------------------------------------------

@pytest.mark.parametrize("argv", [
    ["resolve"],
    ["resolve", "torch", "--driver", "abc"],
    ["resolve", "torch", "--gpu", "NoSuchGPU"],
    ["resolve", "torch", "--python", "2"],
    ["resolve", "torch", "--sources", "ftp://x"],
    ["resolve", "torch==="],
    ["resolve", "torch", "--cc", "9"],
    ["resolve", "nosuchframework"],
    ["resolve", "torch,python=3"],
    ["resolve", "torch\nid"],
    ["require-cuda", "check", "cuda>=12.0", "--driver", "abc"],
    ["require-cuda", "check", "cuda>>12.0", "--driver", "535.104.05"],
    ["matrix", "show", "nosuchsection"],
    ["no-such-command"],
], ids=lambda a: " ".join(a).replace("\n", "\\n"))
def test_bad_input_exits_2_with_one_line_and_no_traceback(capsys, argv):
    rc, out, err = run(capsys, *argv)
    assert rc == 2
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len([ln for ln in lines if not ln.startswith("  ")]) == 1, err
    assert lines[0].startswith("envgen: error: ")
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 2 and json.loads(out)["exit_code"] == 2


# ---- render -------------------------------------------------------------------------------

def test_render_writes_the_build_context(capsys, tmp_path):
    rc, _out, err = run(capsys, "render", "pytorch-cu121", "-o", str(tmp_path / "ctx"))
    assert rc == 0, err
    names = {p.name for p in (tmp_path / "ctx").iterdir()}
    assert {"Dockerfile", "requirements.txt", "environment.yml", "stack.json",
            "torch_smoke.py"} <= names
    assert not [n for n in names if n.startswith(".envgen-render")], "no staging leftovers"
    assert (tmp_path / "ctx" / ".dockerignore").is_file()
    stack = json.loads((tmp_path / "ctx" / "stack.json").read_text())
    assert stack["stack"] == "pytorch-cu121"


def test_render_json_lists_the_files(capsys, tmp_path, monkeypatch):
    from closures import use_fake_resolver
    use_fake_resolver(monkeypatch, tmp_path)
    rc, d = run_json(capsys, "render", "pytorch-cpu", "-o", str(tmp_path))
    assert rc == 0 and d["stack"]["stack"] == "pytorch-cpu"
    assert {p.rsplit("/", 1)[-1] for p in d["files"]} >= {"Dockerfile", "stack.json"}


def test_render_all_json_has_the_keys_contract_md_lists(capsys, tmp_path, monkeypatch):
    from closures import use_fake_resolver
    use_fake_resolver(monkeypatch, tmp_path)
    rc, d = run_json(capsys, "render", "--all", "-o", str(tmp_path / "all"), "--driver",
                     "470.57.02")
    assert set(d) == {"output", "rendered", "failed", "seconds"}
    assert rc == max(f["exit_code"] for f in d["failed"]) == 2
    assert set(d["rendered"][0]) == {"stack", "framework", "version", "path", "closure",
                                     "files"}
    assert {"stack", "error", "message", "file", "line", "exit_code", "hints"} == \
        set(d["failed"][0])


def test_render_into_a_file_is_a_clean_error(capsys, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    rc, _out, err = run(capsys, "render", "pytorch-cu121", "-o", str(f))
    assert rc == 2 and "Traceback" not in err


def test_refresh_help_names_every_reader_in_its_order():
    from envgen.cli import REFRESH_READERS
    from envgen.refresh import READERS
    assert REFRESH_READERS == tuple(READERS)
