#!/usr/bin/env bash
# Installs and starts Debian 12's own Docker engine (20.10, BuildKit 0.8, the classic image store) and the buildx CLI
# on a fresh Debian 12 machine (as root): the engine of the --load build path (`ATOM_BUILD_ENGINE=docker20 bash
# .ci/run`). CI's engine is Docker 26 with the containerd store (.ci/install-docker.sh). Debian 12 ships no buildx;
# Debian 13's docker-buildx package is a static binary that works here.
set -euo pipefail

need_apt=()
command -v dockerd >/dev/null || need_apt+=(docker.io)
command -v mmdebstrap >/dev/null || need_apt+=(mmdebstrap)
if ((${#need_apt[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

plugin_dir=/usr/local/lib/docker/cli-plugins
if ! docker buildx version >/dev/null 2>&1; then
  work=$(mktemp -d)
  mkdir -p "$work/sources" "$work/lists/partial" "$plugin_dir"
  # The first stanza of Debian's own sources file, pointed at trixie.
  awk 'BEGIN{RS="";ORS="\n\n"} NR==1' /etc/apt/sources.list.d/debian.sources \
    | sed -E 's/^Suites:.*/Suites: trixie/' > "$work/sources/trixie.sources"
  apt_opts=(-oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts="$work/sources" -oDir::State::Lists="$work/lists")
  apt-get "${apt_opts[@]}" update -qq
  (cd "$work" && apt-get "${apt_opts[@]}" download docker-buildx >/dev/null)
  dpkg-deb -x "$work"/docker-buildx_*.deb "$work/root"
  install -m 0755 "$(find "$work/root" -type f -path "*/cli-plugins/docker-buildx" | head -n1)" "$plugin_dir/docker-buildx"
  rm -rf "$work"
fi

if ! docker info >/dev/null 2>&1; then
  nohup dockerd --iptables=false --bridge=none >/var/log/dockerd.log 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "dockerd did not answer within 60 s; see /var/log/dockerd.log" >&2; exit 1; }
fi
docker version --format 'docker engine {{.Server.Version}}'
docker buildx version
