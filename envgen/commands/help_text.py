"""What `--help` teaches beyond the arguments: an example per command, the exit codes and the
environment variables envgen reads. Kept apart from cli.py so the parser stays readable;
tests/test_cli_help.py checks that every variable envgen reads is listed here."""
from __future__ import annotations

EXIT_CODES = """\
exit codes:
  0    success
  1    the thing checked is false (certification failed, verify found drift,
       --check found a change, require-cuda said no)
  2    bad input: a spec, flag, matrix, lock, fleet spec or hosts file (the message names file:line)
  3    the environment lacks something (no Docker daemon, no GPU, a registry or index
       that does not answer, a full disk)
  4    a bug in envgen (run again with --debug and report it)
  128+N  ended by signal N (130 for Ctrl-C); nothing half-done is kept, or what
         the daemon did not remove is named"""

ENVIRONMENT = {
    "ENVGEN_HOME": "where certificates, closures, logs and caches live "
                   "(default ~/.local/share/envgen)",
    "ENVGEN_MATRIX": "a matrix file or folder, as --matrix",
    "ENVGEN_SOURCES": "wheel sources, as --sources",
    "ENVGEN_DEBUG": "1: show the traceback of an internal error, as --debug",
    "ENVGEN_NO_CACHE": "1: validate the matrix from scratch instead of using its cache",
    "ENVGEN_NO_HOST_BUILDS": "1: resolving a team's requirements builds no sdist on this "
                             "machine (uv --no-build; an sdist-only package is refused)",
    "ENVGEN_DOCKER": "the docker client to run builds with (default: docker on PATH)",
    "ENVGEN_DOCKER_PING_TIMEOUT": "seconds to wait for the daemon's first answer (default 15)",
    "ENVGEN_DOCKER_TIMEOUT": "seconds any later daemon call may take (default 120)",
    "ENVGEN_BUILD_IDLE_TIMEOUT": "seconds a build may print nothing before it is stopped "
                                 "(default 1800)",
    "ENVGEN_BUILD_NETWORK": "the network of the build's containers: default, host or none",
    "ENVGEN_NETRC": "a netrc file for index logins: uv reads it when resolving, and each "
                    "build mounts it as a BuildKit secret (never in a layer)",
    "ENVGEN_PYPI_SIMPLE": "the simple index that closures and locks are checked against "
                          "(default https://pypi.org/simple)",
    "ENVGEN_DEBIAN_MIRROR": "the Debian mirror a local base is made from; it must serve the "
                            "base's pinned snapshot",
    "ENVGEN_SOURCE_URL": "the team's repository (https), for the images' OCI source label; "
                         "in GitHub Actions taken from GITHUB_SERVER_URL/GITHUB_REPOSITORY",
    "ENVGEN_REVISION": "the commit the image is built from, for the OCI revision label; in "
                       "GitHub Actions taken from GITHUB_SHA",
    "ENVGEN_PROJECT": "the project file to read instead of ./envgen.yaml; '' for none",
    "ENVGEN_APPTAINER": "the program to run apptainer with (default: apptainer on PATH; "
                        "tools/apptainer.sh on Debian 12)",
    "ENVGEN_REFRESH_BACKOFF": "seconds between retries of matrix refresh's index requests "
                              "(default 1)",
}


def environment_text() -> str:
    import textwrap
    width = max(len(k) for k in ENVIRONMENT)
    return "environment:\n" + "\n".join(
        textwrap.fill(v, 88, initial_indent=f"  {k:{width}}  ",
                      subsequent_indent=" " * (width + 4)) for k, v in ENVIRONMENT.items())


TOP = f"""\
examples:
  envgen resolve pytorch-cu121 --driver 535.104.05 --gpu H100
  envgen build pytorch-cu121 --certify
  envgen lock pytorch-cu121 -o envgen.lock
  envgen diff --driver 535.104.05..550.54.14

{EXIT_CODES}

{environment_text()}

With --json a command prints one JSON document on stdout (its shape: docs/contract.md).
--matrix and --debug go before or after the command's name."""

# One example per command, keyed by the command's path ("matrix list", "build", ...).
EXAMPLES = {
    "matrix": "envgen matrix list --driver 535.104.05",
    "matrix list": "envgen matrix list --driver 535.104.05 --gpu H100",
    "matrix show": "envgen matrix show drivers",
    "matrix validate": "envgen --matrix ./matrices matrix validate",
    "matrix refresh": "envgen --matrix ./matrices matrix refresh pytorch --check",
    "completion": "envgen completion bash",
    "init": "envgen init pytorch-cu121 --name trainer",
    "resolve": "envgen resolve 'torch==2.3.1,variant=cu121' --driver 535.104.05 --cc 9.0",
    "closure": "envgen closure pytorch-cu121",
    "render": "envgen render pytorch-cu121 -o ctx/",
    "build": "envgen build pytorch-cu121 --certify --tag registry.example.com/team/torch:2.3",
    "certify": "envgen certify envgen/pytorch-cu121:2.3.1 --gpus all",
    "sif": "envgen sif jax-cpu -o jax-cpu.sif",
    "certs": "envgen certs list",
    "certs list": "envgen certs list --json",
    "certs show": "envgen certs show envgen/pytorch-cu121:2.3.1",
    "certs import": "envgen certs import slurm-4242.out certs/ --json",
    "certs merge": "envgen certs merge /mnt/gpu-host-2/envgen",
    "lock": "envgen lock pytorch-cu121 --push localhost:5000/team -o envgen.lock",
    "verify": "envgen verify envgen.lock --rebuild",
    "diff": "envgen diff --driver 535.104.05..550.54.14 --hosts fleet.yaml",
    "doctor": "envgen doctor",
    "ci": "envgen ci github pytorch-cu121 lightning-cu121 > .github/workflows/envgen.yml",
    "smoke": "envgen smoke --require cuda",
    "require-cuda": "envgen require-cuda check 'cuda>=12.1 brand=tesla' --driver 535.104.05",
    "require-cuda check": "envgen require-cuda check 'cuda>=12.1' --driver 530.30.02",
    "report": "envgen report -o report/ --hosts fleet.yaml",
    "fleet": "envgen fleet fleet.yaml --slurm -o run/ --submit",
    "run": "envgen run --gpus all pytorch-cu121 -- python train.py --epochs 1",
    "shell": "envgen shell pytorch-cu121",
    "profile": "envgen profile pytorch-cu121 --format compose --gpus 0,1",
}


def epilog(path: str) -> str | None:
    example = EXAMPLES.get(path)
    return f"example:\n  {example}" if example else None
