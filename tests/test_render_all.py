"""`envgen render --all -o DIR`: every stack of the matrix into DIR/STACK in one process,
each with the very files `envgen render STACK -o DIR` writes; a stack that fails is named
and does not hide the others. And the writing of a context: a file already right is left
as it is, anything else replaced, nothing written through a link."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envgen.cli import main
from envgen.matrix import load_matrix


def tree(root: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mode & 0o777)
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_stack_gets_the_files_render_stack_writes(tmp_path, monkeypatch, capsys):
    from closures import use_fake_resolver
    use_fake_resolver(monkeypatch, tmp_path)   # stacks whose index this machine cannot reach
    assert main(["render", "--all", "-o", str(tmp_path / "all"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    names = load_matrix().stack_names()
    assert [r["stack"] for r in doc["rendered"]] == names and doc["failed"] == []
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == names
    for name in ("pytorch-cu121", "jax-cpu", "transformers-cu128", "pytorch-cpu"):
        assert main(["render", name, "-o", str(tmp_path / "one" / name)]) == 0
        one, every = tree(tmp_path / "one" / name), tree(tmp_path / "all" / name)
        assert one == every and "Dockerfile" in one, name
        entry = next(r for r in doc["rendered"] if r["stack"] == name)
        assert sorted(Path(f).relative_to(tmp_path / "all" / name).as_posix()
                      for f in entry["files"]) == sorted(one)


def test_a_failing_stack_is_named_and_the_others_are_rendered(tmp_path, monkeypatch, capsys):
    from closures import use_fake_resolver
    use_fake_resolver(monkeypatch, tmp_path)
    out = tmp_path / "all"
    # R470 runs the CUDA 11 stacks and no CUDA 12 or 13 one: Unsatisfiable, exit 2 each
    rc = main(["render", "--all", "-o", str(out), "--driver", "470.57.02"])
    text, err = capsys.readouterr()
    assert rc == 2
    assert "envgen: error: pytorch-cu121: pytorch-cu121 cannot be met" in err
    assert (out / "pytorch-cu117" / "Dockerfile").is_file()
    assert (out / "jax-cpu" / "Dockerfile").is_file()
    assert not (out / "pytorch-cu121").exists()
    assert "failed: " in text and "Traceback" not in err
    rc = main(["render", "--all", "-o", str(out), "--driver", "470.57.02", "--json"])
    doc = json.loads(capsys.readouterr().out)
    failed = {f["stack"]: f for f in doc["failed"]}
    assert rc == 2 and failed["pytorch-cu121"]["error"] == "Unsatisfiable"
    assert failed["pytorch-cu121"]["exit_code"] == 2 and "pytorch-cu117" not in failed
    assert {r["stack"] for r in doc["rendered"]} >= {"pytorch-cu117", "jax-cpu"}


def test_without_a_resolver_a_stack_with_no_stored_closure_is_named(tmp_path, monkeypatch,
                                                                  capsys):
    from envgen.resolve import closure
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(closure, "resolve_closure", lambda *a, **k: pytest.fail("resolved"))
    rc = main(["render", "--all", "--no-resolve", "-o", str(tmp_path / "all"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    missing = {f["stack"] for f in doc["failed"]}
    stored = {r["stack"] for r in doc["rendered"]}
    assert rc == (2 if missing else 0) and stored and not stored & missing
    assert all("envgen closure" in f["message"] for f in doc["failed"])


@pytest.mark.parametrize("argv", [["render", "pytorch-cu121", "--all", "-o", "x"],
                                  ["render", "pytorch-cu121", "--no-resolve", "-o", "x"]])
def test_all_and_a_spec_or_no_resolve_alone_are_usage_errors(argv, capsys, tmp_path):
    assert main([*argv[:-1], str(tmp_path / "x")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_hostile_stack_name_cannot_climb_out_of_dir(tmp_path):
    from envgen.commands.render_all import render_stack
    from envgen.core.errors import InputError
    with pytest.raises(InputError, match="not usable as a folder name"):
        render_stack(None, None, "../../etc", tmp_path)


# ---- writing a context --------------------------------------------------------------------

def test_a_render_again_leaves_right_files_alone_and_fixes_the_rest(tmp_path, capsys):
    out = tmp_path / "ctx"
    assert main(["render", "jax-cpu", "-o", str(out)]) == 0
    before = {p: os.stat(p) for p in out.rglob("*") if p.is_file()}
    docker, script = out / "Dockerfile", out / "base" / "build-base.sh"
    docker.write_text(docker.read_text() + "# edited\n")        # a changed byte
    script.chmod(0o644)                                           # a changed mode
    (out / "base" / "stale.sh").write_text("old")                 # an older render's file
    (out / "install" / "9-old").mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (out / "stack.json").unlink()
    (out / "stack.json").symlink_to(target)                       # a link where a file goes
    assert main(["render", "jax-cpu", "-o", str(out)]) == 0
    assert target.read_text() == "keep" and not (out / "stack.json").is_symlink()
    assert "# edited" not in docker.read_text() and script.stat().st_mode & 0o777 == 0o755
    assert not (out / "base" / "stale.sh").exists() and not (out / "install" / "9-old").exists()
    after = {p: os.stat(p) for p in out.rglob("*") if p.is_file()}
    assert set(after) == set(before)
    untouched = [p for p in before if p not in (docker, script, out / "stack.json")]
    assert untouched and all((before[p].st_ino, before[p].st_mtime_ns) ==
                             (after[p].st_ino, after[p].st_mtime_ns) for p in untouched)
    assert after[docker].st_ino != before[docker].st_ino   # written beside, renamed over
    assert not [p for p in out.rglob(".envgen-render*")]
    capsys.readouterr()
