#!/usr/bin/env bash
# The everyday tier (`nox -s tests`) where a contributor's machine is not CI's own, from a clone of this checkout's
# HEAD (as root, on a fresh machine of this kind; README: Testing):
#   unit-elsewhere.sh folder  as root, in a folder only root may enter (mode 700) whose path holds a space and a
#                             letter outside ASCII
#   unit-elsewhere.sh user    as a user who is not root (a member of video, audio and render, as a user on a GPU host
#                             is), on Debian's own python3, with a pip that has no configuration of its own: it knows
#                             ATOM_BUILD_TORCH_INDEX (where the CPU torch wheel is) and the machine's CA bundle (the
#                             network's TLS proxy), nothing else
# The environment's ATOM_BUILD_MIRROR, ATOM_BUILD_HIP_FIXTURE and ATOM_BUILD_TORCH_INDEX reach the tier either way.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-} in
  folder)
    top=$(mktemp -d)
    trap 'rm -rf "$top"' EXIT
    chmod 700 "$top"
    dir="$top/chéckout with space"
    git clone -q "$src" "$dir"
    cd "$dir"
    nox -s tests
    ;;
  user)
    user=atom-ci
    command -v /usr/bin/python3 >/dev/null && /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || {
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null; }
    for group in video audio render; do getent group "$group" >/dev/null || groupadd "$group"; done
    id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash -G video,audio,render "$user"
    home=$(getent passwd "$user" | cut -d: -f6)
    rm -rf "$home/checkout" "$home/venv"
    git clone -q "$src" "$home/checkout"
    chown -R "$user:" "$home/checkout"
    as_user=(runuser -u "$user" -- env -i HOME="$home" PATH="$home/venv/bin:/usr/bin:/bin" LANG=C.UTF-8
             PIP_CONFIG_FILE=/dev/null PIP_CERT=/etc/ssl/certs/ca-certificates.crt CI="${CI:-true}"
             ATOM_BUILD_TORCH_INDEX="${ATOM_BUILD_TORCH_INDEX:-}" ATOM_BUILD_MIRROR="${ATOM_BUILD_MIRROR:-}"
             ATOM_BUILD_HIP_FIXTURE="${ATOM_BUILD_HIP_FIXTURE:-}")
    "${as_user[@]}" /usr/bin/python3 -m venv "$home/venv"
    "${as_user[@]}" "$home/venv/bin/pip" install --quiet --disable-pip-version-check "nox>=2025.2.9"
    "${as_user[@]}" sh -c 'cd "$HOME/checkout" && python3 --version && nox -s tests'
    ;;
  *)
    echo "usage: unit-elsewhere.sh folder|user" >&2
    exit 2
    ;;
esac
