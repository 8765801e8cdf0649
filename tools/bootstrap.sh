#!/bin/bash
# Install and start what envgen needs on a Debian host, idempotently: Docker's engine
# (Debian's docker.io, for BuildKit through its 20.10 client), docker buildx (for
# `docker buildx bake`), mmdebstrap (local bases) and a virtual environment with envgen.
# With --tests (make test), also what only the tests use: Debian's docker-registry (the real
# OCI registry the tests push to), Slurm and munge (a single-node test cluster), Chromium
# (the report's browser test), the test extra, actionlint, torch and the frameworks over it.
# Run as root or with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
tests=""; [ "${1:-}" = "--tests" ] && tests=1

# pip with its warnings about this machine's own configuration (an extra index or
# find-links folder that does not exist here: "Location '...' is ignored") left out; every
# other line, errors included, goes through, and pip's exit status is kept.
pip() {
  .venv/bin/pip "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2)
}

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v curl >/dev/null || need+=(curl)
command -v ip >/dev/null || need+=(iproute2)
if [ -n "$tests" ]; then
  command -v docker-registry >/dev/null || need+=(docker-registry)
  command -v chromium >/dev/null || need+=(chromium)   # headless, for `envgen report`'s browser test
  # a single-node Slurm cluster for `envgen fleet --slurm`'s real test (tests/services.py)
  command -v slurmctld >/dev/null || [ -x /usr/sbin/slurmctld ] || need+=(slurm-wlm)
  command -v munged >/dev/null || [ -x /usr/sbin/munged ] || need+=(munge)
fi
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
# linux/arm64 images (Grace) built and certified here under emulation: QEMU's static
# user-mode emulator, registered below with binfmt_misc (docs/platforms.md)
[ "$(uname -m)" = aarch64 ] || [ -x /usr/bin/qemu-aarch64-static ] || need+=(qemu-user-static)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

# QEMU's aarch64 handler in binfmt_misc, with the F flag Debian's file gives (the kernel
# opens the emulator now, so containers and BuildKit steps use it without their own copy).
# Without systemd nothing registers it at boot; the kernel keeps it until reboot.
if [ "$(uname -m)" != aarch64 ] && [ -r /usr/lib/binfmt.d/qemu-aarch64.conf ]; then
  binfmt=/proc/sys/fs/binfmt_misc
  [ -e $binfmt/register ] || $SUDO mount -t binfmt_misc binfmt_misc $binfmt 2>/dev/null || true
  if [ -e $binfmt/register ] && [ ! -e $binfmt/qemu-aarch64 ]; then
    $SUDO sh -c "cat /usr/lib/binfmt.d/qemu-aarch64.conf > $binfmt/register" \
      && echo "registered qemu-aarch64 with binfmt_misc (linux/arm64 images run emulated)"
  fi
  [ -e $binfmt/qemu-aarch64 ] || echo "binfmt_misc could not be mounted or written (it" \
    "needs root on the host, not in a container): linux/arm64 images cannot run here"
fi

# docker buildx: bookworm has none; trixie's 0.13.1 is a static Go plugin that needs only
# libc6 >= 2.34, so its .deb installs on bookworm without pulling newer libraries. Pinned
# by sha256, like everything else envgen installs.
if [ "$(dpkg --print-architecture)" = amd64 ] && [ ! -x /usr/libexec/docker/cli-plugins/docker-buildx ]; then
  deb=docker-buildx_0.13.1+ds1-3_amd64.deb
  sha=fcf8c48204d1603c8f209451d7827eb91bf30759578baf7704e9e1a87e5f1d7f
  tmp=$(mktemp -d)
  curl -fsSL -o "$tmp/$deb" "http://deb.debian.org/debian/pool/main/d/docker-buildx/$deb"
  echo "$sha  $tmp/$deb" | sha256sum -c --quiet -
  $SUDO dpkg -i "$tmp/$deb" >/dev/null
  rm -rf "$tmp"
fi

if ! $SUDO docker info >/dev/null 2>&1; then
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    $SUDO systemctl start docker
  else
    echo "starting dockerd"
    # A container gets no ulimit above dockerd's own hard limit, and envgen's run profile
    # asks memlock=-1 (pinned memory, RDMA): raise dockerd's limits as it starts. Without
    # CAP_SYS_RESOURCE (dockerd inside a container) they cannot be raised; envgen then runs
    # containers without them and says so once for this daemon.
    $SUDO bash -c 'ulimit -l unlimited' 2>/dev/null || echo "dockerd keeps its memlock" \
      "limit (raising it needs CAP_SYS_RESOURCE): containers run without --ulimit memlock=-1"
    $SUDO bash -c 'ulimit -l unlimited 2>/dev/null; exec setsid dockerd' \
      >/tmp/dockerd.log 2>&1 < /dev/null &
  fi
  for _ in $(seq 60); do $SUDO docker info >/dev/null 2>&1 && break; sleep 1; done
  $SUDO docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /tmp/dockerd.log"; exit 3; }
fi
# A dockerd started with --bridge=none elsewhere on the host deletes docker0, and builds
# then fail to start their steps; put the default bridge back as dockerd made it.
if ! ip link show docker0 >/dev/null 2>&1 && [ -z "${ENVGEN_NO_BRIDGE_FIX:-}" ]; then
  $SUDO ip link add docker0 type bridge && $SUDO ip addr add 172.17.0.1/16 dev docker0 \
    && $SUDO ip link set docker0 up && echo "restored the docker0 bridge"
fi

# (Re)install when the venv is missing or holds an older envgen than this checkout.
want=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' envgen/__init__.py)
extra=""; [ -n "$tests" ] && extra="[test]"
if [ ! -x .venv/bin/envgen ] || [ "$(.venv/bin/envgen --version 2>/dev/null)" != "envgen $want" ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  pip install -q --upgrade pip
  pip uninstall -q -y envgen >/dev/null 2>&1 || true
  pip install -q -e ".$extra"
fi
[ -n "$tests" ] || { echo "ready: $(.venv/bin/envgen --version), docker $($SUDO docker version --format '{{.Server.Version}}')"; exit 0; }

# ---- what only the tests need ----
# a venv made before check-jsonschema joined the test extra, or by `make demo`
[ -x .venv/bin/check-jsonschema ] && [ -x .venv/bin/ruff ] && .venv/bin/python -c 'import xdist' 2>/dev/null \
  || pip install -q -e '.[test]'
# actionlint (a wheel of its own, the actionlint extra) is tried once per venv
if [ ! -x .venv/bin/actionlint ] && [ ! -e .venv/.no-actionlint ]; then
  pip install -q -e '.[actionlint]' >/dev/null 2>&1 || { touch .venv/.no-actionlint
    echo "actionlint could not be installed from the package index: the actionlint tests" \
         "will be skipped; rm .venv/.no-actionlint to retry"; }
fi
# torch (CPU is enough) for `envgen smoke` and the payload's own tests
.venv/bin/python -c 'import torch' 2>/dev/null || pip install -q "${ENVGEN_TORCH:-torch==2.13.0}" || \
  echo "torch could not be installed: the payload's native tests will be skipped"
# the frameworks built over torch, for their payloads' native tests, over that same torch
if .venv/bin/python -c 'import torch' 2>/dev/null && \
   ! .venv/bin/python -c 'import lightning, transformers, accelerate' 2>/dev/null; then
  tv=$(.venv/bin/python -c 'import torch; print(torch.__version__)' 2>/dev/null)
  pip install -q -c <(echo "torch==$tv") lightning transformers accelerate || \
    echo "lightning/transformers/accelerate could not be installed: their native tests will be skipped"
fi
echo "ready: $(.venv/bin/envgen --version), docker $($SUDO docker version --format '{{.Server.Version}}')"
