"""Shell completion, generated from the CLI's own parser: commands, subcommands, options,
the choices an option takes, files where a path goes, and the matrix's stack names where a
SPEC goes. `envgen completion bash` (zsh loads the same through bashcompinit).

Why not a library (weighed 2026-12-03, issue 31): shtab 1.13.0 turns this parser into an
equivalent bash script (the 7 completions the tests ask for came out the same) and a native
zsh one, but it walks the same private argparse attributes this module does
(`_actions`, `_SubParsersAction`: 20 uses in shtab/__init__.py), and completing stack names
where a SPEC goes would still take a walk of `_actions` here or a `.complete` on every SPEC
argument in cli.py; for that, one more runtime dependency. argcomplete would call envgen's
Python on every Tab (import and parser: 0.29-0.38 s here). The private API is read in
`_walk` and `_words` only, and tests/test_completion.py runs the script in a real bash, so
an argparse that changed would fail there, not at a user's Tab."""
from __future__ import annotations

import argparse
import re
import shlex

SAFE = re.compile(r"[A-Za-z0-9_.,:=+@%/-]+")


def _walk(parser: argparse.ArgumentParser, path: str = ""):
    """(path, parser) of the parser and every subcommand under it; path joined by ':'."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _walk(child, f"{path}:{name}" if path else name)


def _words(parser, stacks: list[str]) -> tuple[list[str], bool]:
    """The words that may come next at this command, and whether a SPEC may."""
    words: list[str] = []
    spec = False
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            words += list(action.choices)
        elif action.option_strings:
            words += [o for o in action.option_strings if o.startswith("--")] or \
                action.option_strings
        elif action.metavar in ("SPEC", "IMAGE|SPEC", "STACK") or action.dest == "spec":
            spec = True
        elif action.choices:
            words += [str(c) for c in action.choices]
    return words + (stacks if spec else []), spec


PATH_DESTS = {"output", "matrix", "fleet", "lock", "merge", "old", "new", "inputs"}


def bash(parser: argparse.ArgumentParser, stacks: list[str]) -> str:
    steps, cases, values, files = [], [], {}, set()
    for path, p in _walk(parser):
        words, _ = _words(p, stacks)
        cases.append(f"        {shlex.quote(path)}) words={shlex.quote(' '.join(words))} ;;")
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name in action.choices:
                    steps.append(shlex.quote(f"{path}/{name}"))
            elif action.option_strings and action.choices:
                for o in action.option_strings:
                    values.setdefault(o, set()).update(str(c) for c in action.choices)
            elif action.option_strings and (action.dest in PATH_DESTS or
                                            action.metavar in ("FILE", "DIR", "PATH", "LOCK")):
                files.update(action.option_strings)
    for word in [*stacks, *(w for v in values.values() for w in v)]:
        if not SAFE.fullmatch(word):
            raise ValueError(f"{word!r} cannot go in a completion script")
    value_cases = "\n".join(
        f"        {o}) COMPREPLY=($(compgen -W {shlex.quote(' '.join(sorted(v)))} -- \"$cur\"))"
        f"; return ;;" for o, v in sorted(values.items()))
    file_case = "|".join(sorted(files))
    return f"""\
# envgen completion for bash (and zsh through bashcompinit). Load it with
#   source <(envgen completion bash)
# or write it to ~/.local/share/bash-completion/completions/envgen.
_envgen() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD-1]}} path="" words w i
    for ((i = 1; i < COMP_CWORD; i++)); do
        w=${{COMP_WORDS[i]}}
        case "$path/$w" in
            {'|'.join(steps)}) path=${{path:+$path:}}$w ;;
        esac
    done
    case "$prev" in
{value_cases}
        {file_case}) COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    case "$path" in
{chr(10).join(cases)}
        *) words="" ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
}}
complete -o default -F _envgen envgen
"""


def zsh(parser: argparse.ArgumentParser, stacks: list[str]) -> str:
    return ("# envgen completion for zsh: source <(envgen completion zsh)\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser, stacks))
