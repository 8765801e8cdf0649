"""CI files from data: a GitHub Actions workflow (build on a CPU runner, certify, lock and
verify on a GPU runner) and a docker-bake.json. Rendered with yaml/json dumpers, never string
templates, so every value is quoted correctly."""
from __future__ import annotations

import json
import shlex

import yaml

from . import __version__
from .build import CA_BUNDLE, default_tag
from .model import Stack
from .render.views import image_labels

DEFAULT_STACKS = ("pytorch-cu121", "pytorch-cu126", "pytorch-cu128")
GPU_RUNNER = ["self-hosted", "gpu"]
CONTEXT_ROOT = "envgen-contexts"


def default_specs(stack_names: list[str]) -> list[str]:
    chosen = [s for s in DEFAULT_STACKS if s in stack_names]
    return chosen or list(stack_names)


def _setup(version: str) -> list[dict]:
    return [{"uses": "actions/checkout@v4"},
            {"uses": "actions/setup-python@v5", "with": {"python-version": "3.11"}},
            {"name": "Install envgen",
             "run": f"python -m pip install {shlex.quote(f'envgen=={version}')}"}]


class _NoAliases(yaml.SafeDumper):
    """safe_dump without &anchors/*aliases for repeated values: plain YAML for any reader."""

    def ignore_aliases(self, data):
        return True


def github_workflow(specs: list[str], version: str = __version__) -> str:
    stacks = {"stack": list(specs)}
    each = "${{ matrix.stack }}"
    workflow = {
        "name": "envgen",
        "on": {"push": {"branches": ["main"]}, "pull_request": {}, "workflow_dispatch": {}},
        "permissions": {"contents": "read"},
        "jobs": {
            "build": {
                "name": f"build {each} (CPU smoke)",
                "runs-on": "ubuntu-latest",
                "strategy": {"fail-fast": False, "matrix": stacks},
                "steps": [*_setup(version),
                          {"name": "mmdebstrap (envgen's local Debian bases)",
                           "run": "sudo apt-get update -q && sudo apt-get install -y -q "
                                  "mmdebstrap"},
                          {"name": "Build and certify on the CPU",
                           "run": f'envgen build "{each}" --certify --gpus none --json'}],
            },
            "certify": {
                "name": f"certify {each} on a GPU",
                "needs": "build",
                "runs-on": GPU_RUNNER,
                "env": {"ENVGEN_HOME": "/var/lib/envgen"},
                "strategy": {"fail-fast": False, "max-parallel": 1, "matrix": stacks},
                "steps": [*_setup(version),
                          {"name": "Build", "run": f'envgen build "{each}" --json'},
                          {"name": "Certify on every GPU",
                           "run": f'envgen certify "{each}" --gpus all --json'}],
            },
            "lock": {
                "name": "lock the certified images",
                "needs": "certify",
                "if": "github.event_name != 'pull_request'",
                "runs-on": GPU_RUNNER,
                "env": {"ENVGEN_HOME": "/var/lib/envgen"},
                "steps": [*_setup(version),
                          {"name": "Lock",
                           "run": "envgen lock " + " ".join(shlex.quote(s) for s in specs)
                                  + " -o envgen.lock --json"},
                          {"uses": "actions/upload-artifact@v4",
                           "with": {"name": "envgen.lock", "path": "envgen.lock"}}],
            },
            "verify": {
                "name": "verify envgen.lock",
                "needs": "certify",
                "runs-on": GPU_RUNNER,
                "env": {"ENVGEN_HOME": "/var/lib/envgen"},
                "steps": [*_setup(version),
                          {"name": "Verify the committed lock",
                           "if": "hashFiles('envgen.lock') != ''",
                           "run": "envgen verify envgen.lock --json"}],
            },
        },
    }
    # GPU jobs share ENVGEN_HOME on the self-hosted runner: lock reads certify's certificates.
    return yaml.dump(workflow, Dumper=_NoAliases, sort_keys=False, width=1000,
                     default_flow_style=False)


def bake(stacks: list[Stack], base_refs: dict[str, str] | None = None) -> str:
    """docker-bake.json: one target per stack, built from `envgen render STACK -o
    ${ENVGEN_CONTEXTS}/STACK`; group "default" holds them all."""
    targets = {}
    for st in stacks:
        ref = (base_refs or {}).get(st.stack) or st.base.reference
        targets[st.stack] = {
            "context": f"${{ENVGEN_CONTEXTS}}/{st.stack}",
            "dockerfile": "Dockerfile",
            "tags": [default_tag(st)],
            "labels": dict(image_labels(st, ref)),
            "secret": [f"id=ca,src={CA_BUNDLE}"],
        }
    doc = {"variable": {"ENVGEN_CONTEXTS": {"default": CONTEXT_ROOT}},
           "group": {"default": {"targets": list(targets)}},
           "target": targets}
    return json.dumps(doc, indent=2) + "\n"
