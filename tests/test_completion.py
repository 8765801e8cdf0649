"""Shell completion for real: the script `envgen completion bash` prints, loaded into a
real bash, completing commands, subcommands, options, an option's choices and the
matrix's stack names, as a user's Tab would."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from envgen.cli import build_parser
from envgen.commands import completion

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    out = subprocess.run([sys.executable, "-m", "envgen", "completion", "bash"],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    path = tmp_path_factory.mktemp("completion") / "envgen.bash"
    path.write_text(out.stdout)
    return path


def complete(script, *words) -> list[str]:
    """COMPREPLY after Tab on the last word of `envgen WORDS...` in a real bash."""
    quoted = " ".join(f"'{w}'" for w in ("envgen", *words))
    code = (f"source {script}; COMP_WORDS=({quoted}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1));"
            f" _envgen; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    r = subprocess.run(["bash", "--norc", "-c", code], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.splitlines() if w]


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize("words, expect", [
    (("bu",), ["build"]),
    (("matrix", "sh"), ["show"]),
    (("matrix", "show", "gp"), ["gpus", "gpu_architectures"]),
    (("build", "--progress", "pl"), ["plain"]),
    (("certify", "x", "--gpu-access", "c"), ["cdi"]),
    (("build", "pytorch-cu121", "--no-"), ["--no-cache"]),
    (("certs", "sh"), ["show"]),
    (("completion", "z"), ["zsh"]),
    (("render", "--al"), ["--all"]),
])
def test_tab_completes_commands_options_and_choices(script, words, expect):
    assert complete(script, *words) == expect


def test_tab_completes_stack_names_where_a_spec_goes(script):
    got = complete(script, "build", "jax-")
    assert "jax-cuda12" in got and all(w.startswith("jax-") for w in got)
    assert complete(script, "doctor", "jax-") == []   # doctor takes no SPEC


def test_a_value_that_could_break_the_script_is_refused():
    with pytest.raises(ValueError):
        completion.bash(build_parser(), ["ok", "$(reboot)"])


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed here")
def test_zsh_loads_it(tmp_path):
    (tmp_path / "c.zsh").write_text(completion.zsh(build_parser(), ["pytorch-cu121"]))
    r = subprocess.run(["zsh", "-f", "-c", f"source {tmp_path}/c.zsh && "
                        "complete -p envgen"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "_envgen" in r.stdout, r.stderr
