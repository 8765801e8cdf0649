#!/bin/bash
# Install and start what envgen needs on a Debian host, idempotently: Docker's engine
# (Debian's docker.io, for BuildKit through its 20.10 client), mmdebstrap (local bases),
# and a virtual environment with envgen and its test tools. Run as root or with sudo.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"

need=()
command -v dockerd >/dev/null || need+=(docker.io)
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
python3 -c 'import ensurepip' 2>/dev/null || need+=(python3-venv)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

if ! $SUDO docker info >/dev/null 2>&1; then
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    $SUDO systemctl start docker
  else
    echo "starting dockerd"
    $SUDO setsid dockerd >/tmp/dockerd.log 2>&1 < /dev/null &
  fi
  for _ in $(seq 60); do $SUDO docker info >/dev/null 2>&1 && break; sleep 1; done
  $SUDO docker info >/dev/null 2>&1 || { echo "dockerd did not start; see /tmp/dockerd.log"; exit 3; }
fi

if [ ! -x .venv/bin/envgen ]; then
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -e '.[test]'
fi
# torch (CPU is enough) for `envgen smoke` and the payload's own tests
.venv/bin/python -c 'import torch' 2>/dev/null || .venv/bin/pip install -q "${ENVGEN_TORCH:-torch==2.13.0}" || \
  echo "torch could not be installed: the payload's native tests will be skipped"
echo "ready: $(.venv/bin/envgen --version), docker $($SUDO docker version --format '{{.Server.Version}}')"
