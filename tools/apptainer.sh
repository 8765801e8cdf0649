#!/bin/bash
# `apptainer` on a host whose distribution has none (Debian 12): Debian sid's apptainer and
# squashfs-tools in a root file system of their own (sid's libc is newer than bookworm's),
# made once with mmdebstrap and cached, and run there as root in a private mount
# namespace (pivot_root, not chroot: apptainer refuses a chroot). envgen calls it when
# ENVGEN_APPTAINER names this file, exactly as it calls `apptainer` on an HPC host.
#
#   tools/apptainer.sh --setup        make the root file system (idempotent); print its path
#   tools/apptainer.sh ARGS...        apptainer ARGS, inside it
#
# Seen inside at the same paths: /proc, /sys, /dev, /tmp, the current folder, $HOME,
# ENVGEN_HOME, the Docker socket, and each folder of ENVGEN_APPTAINER_BINDS (one per line).
# ENVGEN_APPTAINER_ROOTFS: where the root file system lives (default under /var/cache).
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "tools/apptainer.sh: run as root (it makes a mount namespace)" >&2; exit 3; }
MIRROR="${ENVGEN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PACKAGES="apptainer,squashfs-tools,ca-certificates,mount,tzdata"
# The folder is named for its recipe: a changed recipe makes a new one.
RECIPE=$(printf '%s\n' "sid" "$PACKAGES" "v1" | sha256sum | cut -c1-12)
ROOT="${ENVGEN_APPTAINER_ROOTFS:-/var/cache/envgen/apptainer-sid-$RECIPE}"

setup() {
  [ -x "$ROOT/usr/bin/apptainer" ] && return 0
  command -v mmdebstrap >/dev/null || { echo "tools/apptainer.sh: mmdebstrap is not installed (tools/bootstrap.sh installs it)" >&2; exit 3; }
  mkdir -p "$(dirname "$ROOT")"
  local tmp; tmp=$(mktemp -d "$ROOT.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT INT TERM
  # The archive here is a dated snapshot whose Release file has expired: apt must not care.
  mmdebstrap --variant=apt --quiet --aptopt='Acquire::Check-Valid-Until "false"' \
    --include="$PACKAGES" \
    --customize-hook='printf "127.0.0.1 localhost\n::1 localhost ip6-localhost\n" > "$1/etc/hosts"' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/*' \
    --customize-hook='mkdir -p "$1/.oldroot"' \
    sid "$tmp" "$MIRROR" >&2
  # apptainer as root asks to keep every capability; a host whose bounding set lacks one
  # (a container) refuses that. envgen passes --no-privs anyway.
  sed -i 's/^root default capabilities = full/root default capabilities = no/' \
    "$tmp/etc/apptainer/apptainer.conf"
  mv "$tmp" "$ROOT" 2>/dev/null || { [ -x "$ROOT/usr/bin/apptainer" ] || exit 1; }   # another setup won
  trap - EXIT INT TERM
  rm -rf "$tmp"
}

if [ "${1:-}" = "--setup" ]; then
  setup
  echo "$ROOT"
  exit 0
fi
setup

binds=(/tmp "$PWD" "${HOME:-/root}")
[ -n "${ENVGEN_HOME:-}" ] && binds+=("$ENVGEN_HOME")
[ -S /var/run/docker.sock ] && binds+=(/var/run/docker.sock)
if [ -n "${ENVGEN_APPTAINER_BINDS:-}" ]; then
  while IFS= read -r d; do [ -n "$d" ] && binds+=("$d"); done <<< "$ENVGEN_APPTAINER_BINDS"
fi

# In the new namespace: the root file system bound on itself (pivot_root needs a mount
# point), the kernel's folders and the host folders over it, then pivot into it. Nothing
# mounted here outlives the namespace; the last process gone, it is all gone.
exec unshare --mount --propagation private -- /bin/bash -c '
set -eu
root=$1; shift; n=$1; shift; here=$PWD
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
for ((i = 0; i < n; i++)); do
  src=$1; shift
  [ -e "$src" ] || continue
  # the real path: a symbolic link in it (/var/run -> /run) would be followed under the
  # root file system too, and an absolute one out of it
  src=$(readlink -f -- "$src")
  case "$src" in /) continue ;; /*) ;; *) continue ;; esac
  if [ -d "$src" ]; then mkdir -p "$root$src"; else mkdir -p "$root$(dirname "$src")"; touch "$root$src"; fi
  mount --rbind "$src" "$root$src"
done
cd "$root"
pivot_root . .oldroot
exec /usr/sbin/chroot . /bin/sh -c "umount -l /.oldroot && cd \"\$0\" 2>/dev/null || cd /; exec apptainer \"\$@\"" "$here" "$@"
' bash "$ROOT" "${#binds[@]}" "${binds[@]}" "$@"
