"""Help that teaches: every argument explained, an example per command that parses, the exit
codes and every ENVGEN_* variable envgen reads in `envgen --help`, global options after the
command's name, and README command lines that work when pasted one per line."""
from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest

from envgen.cli import build_parser, main
from envgen.commands import help_text as cli_help
from envgen.smoke._harness import tally

ROOT = Path(__file__).resolve().parents[1]


def commands(parser=None, path=""):
    """(path, parser) of every command and subcommand."""
    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, child in action.choices.items():
                where = f"{path} {name}".strip()
                yield where, child, helps.get(name)
                yield from commands(child, where)


def test_every_command_and_argument_has_help():
    missing = []
    for path, parser, cmd_help in commands():
        if not cmd_help:
            missing.append(path)
        for a in parser._actions:
            if not a.help and not isinstance(a, (argparse._HelpAction,
                                                 argparse._SubParsersAction)):
                missing.append(f"{path} {a.option_strings or a.dest}")
    assert missing == []


def test_every_command_has_an_example_that_parses():
    parser = build_parser()
    for path, sub, _ in commands():
        assert sub.epilog and sub.epilog.startswith("example:"), path
        argv = shlex.split(cli_help.EXAMPLES[path])
        assert argv[0] == "envgen"
        args = parser.parse_args(argv[1:])   # an InputError here fails the test
        assert args.command == path.split()[0]


def test_top_level_help_lists_exit_codes_and_every_variable(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "128+N" in out
    for name in cli_help.ENVIRONMENT:
        assert name in out


def _read_variables() -> set[str]:
    """ENVGEN_* variables the package's code reads (os.environ, seconds_from_env and
    environ.checked)."""
    found = set()
    for f in (ROOT / "envgen").rglob("*.py"):
        text = f.read_text()
        found |= set(re.findall(r"""(?:environ|env)(?:\.get\(|\[)\s*["'](ENVGEN_[A-Z_]+)""",
                                text))
        found |= set(re.findall(r"""(?:seconds_from_env|checked)\(\s*["'](ENVGEN_[A-Z_]+)""",
                                text))
    return found


def test_every_variable_envgen_reads_is_in_the_help_and_none_is_made_up():
    read = _read_variables()
    assert {"ENVGEN_HOME", "ENVGEN_DOCKER_TIMEOUT", "ENVGEN_NETRC"} <= read   # the scan works
    assert read - set(cli_help.ENVIRONMENT) == set(), "read but not in --help"
    assert set(cli_help.ENVIRONMENT) - read - {"ENVGEN_DEBUG"} == set(), "listed, never read"


def test_matrix_after_the_command_name(tmp_path, capsys):
    broken = tmp_path / "m"
    broken.mkdir()
    (broken / "drivers.yaml").write_text("drivers: [\n")
    before = main(["--matrix", str(broken), "matrix", "validate"])
    err_before = capsys.readouterr().err
    after = main(["matrix", "validate", "--matrix", str(broken)])
    err_after = capsys.readouterr().err
    assert before == after == 2
    assert err_before == err_after and "drivers.yaml" in err_after
    assert main(["matrix", "validate", "--matrix", str(ROOT / "matrices")]) == 0


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("## What you can ask", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    lines = [ln.split("  #", 1)[0].strip() for ln in block.splitlines()]
    return [ln for ln in lines if ln]


def test_readme_lines_parse_when_pasted_one_per_line():
    cmds = _readme_commands()
    assert len(cmds) >= 15
    parser = build_parser()
    for line in cmds:
        argv = shlex.split(line)
        assert argv[0] == "envgen", line
        parser.parse_args(argv[1:])


@pytest.mark.parametrize("line", [c for c in _readme_commands()
                                  if c.split()[1] in ("resolve", "matrix", "require-cuda",
                                                      "closure", "diff")])
def test_readme_lines_that_need_no_docker_run(line, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    argv = shlex.split(line)[1:]
    answers = (0, 1) if argv[0] == "require-cuda" else (0,)   # its answer is the exit code
    assert main(argv) in answers, capsys.readouterr().err


def test_every_json_document_starts_with_its_schema_version(capsys):
    for argv in (["matrix", "list"], ["matrix", "show", "drivers"], ["matrix", "validate"],
                 ["resolve", "pytorch-cu121"], ["resolve", "nosuchstack"],
                 ["require-cuda", "check", "cuda>=12.1", "--driver", "535.104.05"]):
        main([*argv, "--json"])
        doc = json.loads(capsys.readouterr().out)
        assert next(iter(doc)) == "schema_version" and doc["schema_version"] == 1, argv


def test_checks_are_counted_one_way():
    checks = [{"name": "a", "passed": True}, {"name": "b", "passed": True, "skipped": True},
              {"name": "c", "passed": False, "skipped": True}, {"name": "d", "passed": False}]
    assert tally(checks) == "1 passed, 1 skipped, 2 failed"
    assert tally([]) == "0 passed, 0 skipped, 0 failed"


def test_tables_fit_the_terminal_and_say_yes_or_no(monkeypatch, capsys):
    from envgen.commands._common import table
    text = table([["a" * 80, True, None], ["b", False, "x" * 90]], ["name", "ok", "why"],
                 width=60)
    lines = text.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 60
    assert "yes" in lines[2] and "no" in lines[3] and "True" not in text and "…" in text
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["matrix", "list"]) == 0
    assert max(len(line.rstrip()) for line in capsys.readouterr().out.splitlines()) <= 80
    assert main(["resolve", "pytorch-cu121"]) == 0
    assert max(len(line) for line in capsys.readouterr().out.splitlines()
               if line.startswith(("  packages", "            "))) <= 80
