"""Hostile input to `envgen run`, `envgen sif` and `envgen ci`, offline: no daemon, no
apptainer, no docker client is started. Each case once ended in exit 4, a multi-line or
kilobyte echo, a clobbered device, a leftover file or a broken workflow."""
from __future__ import annotations

import errno
import os
import shutil

import pytest

from envgen.cli import main
from envgen.core.errors import EnvironmentMissing, InputError
from envgen.render import ci
from envgen.runtime import apptainer
from envgen.runtime import sif as sif_mod

GIT = "git+https://github.com/envgen/envgen@" + "0123456789abcdef" * 2 + "01234567"


# ---- envgen sif -o ------------------------------------------------------------------------

@pytest.mark.parametrize("out", ["/dev/null", "{fifo}"])
def test_sif_never_writes_over_a_device_or_a_pipe(tmp_path, out):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="is not a regular file"):
        sif_mod.check_output(out.replace("{fifo}", str(tmp_path / "fifo")))


def test_sif_output_errors_are_one_short_line(tmp_path):
    for out in (f"{tmp_path}/a\nb/x.sif", "/etc/passwd/" + "d/" * 1500 + "x.sif"):
        with pytest.raises(InputError) as e:
            sif_mod.check_output(out)
        assert "\n" not in str(e.value) and len(str(e.value)) < 200


class _Image:
    def save(self, named=False):
        return [b"layer"]


class _Client:
    class images:   # noqa: N801 (docker-py's shape)
        @staticmethod
        def get(_ref):
            return _Image()


def test_a_failed_copy_to_another_file_system_leaves_no_part_file(tmp_path, monkeypatch):
    from envgen.runtime.docker import Target
    monkeypatch.setenv("ENVGEN_HOME", str(tmp_path / "home"))
    stack = type("S", (), {"stack": "pytorch-cu121"})()
    monkeypatch.setattr(sif_mod, "inspect_target", lambda c, ref: Target(
        "sha256:" + "a" * 64, (ref,), stack, {}, "envgen", {}, ()))
    monkeypatch.setattr(apptainer, "version", lambda: "1.4.0")

    def build(args, timeout, binds=(), cwd=None):
        with open(os.path.join(cwd, "out.sif"), "wb") as f:
            f.write(b"sif")
        return 0, "", ""
    monkeypatch.setattr(apptainer, "run", build)
    real_replace = os.replace

    def replace(src, dst):
        if str(src).endswith("out.sif"):
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real_replace(src, dst)

    def full_disk(src, dst):
        with open(dst, "wb") as f:
            f.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(shutil, "copyfile", full_disk)
    dest = tmp_path / "out"
    dest.mkdir()
    with pytest.raises(OSError):
        sif_mod.make_sif(_Client(), "img", str(dest / "x.sif"))
    assert list(dest.iterdir()) == []


# ---- apptainer that cannot start or answer ------------------------------------------------

def test_an_apptainer_that_cannot_start_is_exit_3_not_a_bug(tmp_path, monkeypatch):
    fake = tmp_path / "apptainer"
    fake.write_text("echo no #! line\n")
    fake.chmod(0o755)
    monkeypatch.setenv("ENVGEN_APPTAINER", str(fake))
    with pytest.raises(EnvironmentMissing, match="cannot be started"):
        apptainer.version()


def test_an_apptainer_that_does_not_answer_is_exit_3_not_a_bug(monkeypatch):
    def hangs(args, timeout, **kw):
        raise TimeoutError(f"apptainer {args[0]} did not finish within {timeout} s")
    monkeypatch.setattr(apptainer, "run", hangs)
    with pytest.raises(EnvironmentMissing, match="did not answer"):
        apptainer.version()


# ---- envgen run: the docker client that does not start ------------------------------------

@pytest.fixture
def no_daemon(tmp_path, monkeypatch):
    """`envgen run` up to its exec, with the daemon, the host and the probe faked."""
    from envgen.commands import run as cmd
    from envgen.commands._common import load_matrix_for, resolve_for
    from envgen.runtime.docker import Target
    from envgen.runtime.gpu_access import GpuPlan
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ENVGEN_PROJECT", "")
    stack = resolve_for(None, load_matrix_for(None), "pytorch-cu121")

    class Client:
        def info(self):
            return {}
    monkeypatch.setattr(cmd.engine, "client", Client)
    monkeypatch.setattr(cmd, "_target", lambda c, ref, spec: ref or spec)
    monkeypatch.setattr(cmd, "inspect_target", lambda c, ref: Target(
        "sha256:" + "a" * 64, (ref,), stack, {}, "envgen", {}, ()))
    monkeypatch.setattr(cmd.host, "detect", lambda: type("H", (), {"gpus": [], "error": ""}))
    monkeypatch.setattr(cmd, "preflight", lambda *a: [])
    monkeypatch.setattr(cmd.gpu_access, "plan", lambda *a: GpuPlan("none"))
    monkeypatch.setattr(cmd, "_refused_ulimits", lambda *a: ())
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")

    def fail_with(code):
        def execv(path, argv):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr(os, "execv", execv)
    return fail_with


@pytest.mark.parametrize("code,rc,needle", [
    (errno.ENOEXEC, 3, "cannot be started"),        # a docker this system cannot run
    (errno.E2BIG, 2, "longer than this system takes"),   # -e values past ARG_MAX
])
def test_a_docker_that_does_not_start_is_one_sentence_not_a_bug(no_daemon, capsys, code, rc,
                                                                 needle):
    no_daemon(code)
    assert main(["run", "--gpus", "none", "pytorch-cu121", "--", "true"]) == rc
    err = capsys.readouterr().err
    assert needle in err and "internal error" not in err


# ---- envgen ci ----------------------------------------------------------------------------

def test_a_spec_given_twice_is_refused_before_anything_is_printed(capsys):
    # two matrix entries of one stack share a key: their artifacts would clash in CI
    assert main(["ci", "github", "pytorch-cu121", "pytorch-cu121", "--envgen-source", GIT]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "given twice" in out.err


@pytest.mark.parametrize("flag,value", [("--registry", "ghcr.io/team/envgen"),
                                        ("--envgen-source", "$(id)")])
def test_bake_refuses_the_flags_it_would_ignore(capsys, flag, value):
    assert main(["ci", "bake", "pytorch-cu121", flag, value]) == 2
    out = capsys.readouterr()
    assert out.out == "" and flag in out.err


def test_a_registry_with_an_expression_is_named_short():
    with pytest.raises(InputError) as e:
        ci.github_workflow(["pytorch-cu121"], envgen_source=GIT,
                           registry="${{ secrets.X }}" + "x" * 5000)
    assert len(e.value.message) < 200


@pytest.mark.parametrize("second,seen", [
    ("x" * 5000, "'" + "x" * 39 + "...'"),   # cut, never a 5,000-character echo
    ("3.1\n2", "'3.1\\n2'"),                 # a line break shows as \n, not a new line
    ("3.12", "3.12")])                       # a plain value as written
def test_an_option_given_twice_names_both_values_cut_and_quoted(capsys, second, seen):
    assert main(["resolve", "torch", "--python", "3.11", "--python", second]) == 2
    err = capsys.readouterr().err
    assert f"given twice (3.11, then {seen}): give it once" in err
    assert len(err.splitlines()) == 1
