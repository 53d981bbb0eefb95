#!/usr/bin/env bash
# Installs and starts a current Docker engine on a Debian 12 machine (as root): Debian 13's docker.io (26.1) and
# containerd (1.7) with the containerd image store, Debian 12's runc (Debian 13's needs glibc 2.38), the buildx
# plugin and mmdebstrap. Debian 12 ships none of the trixie packages: they are fetched with `apt-get download` from
# the trixie suite and unpacked under /opt/atom-build/docker26 (nothing of the system's packages is replaced).
#
#   install-docker.sh              THE engine on the default socket (unix:///run/docker.sock, /var/lib/docker):
#                                  CI's engine (`bash .ci/run`)
#   install-docker.sh --side NAME  a second engine beside one already running: unix:///run/NAME.sock, data in
#                                  /var/lib/NAME, its own exec root, pidfile and containerd; use it with
#                                  DOCKER_HOST=unix:///run/NAME.sock (`DOCKER_SIDE=NAME bash .ci/run`)
# Debian 12's own Docker 20.10 (BuildKit 0.8, the classic store) is .ci/install-docker20.sh.
# Idempotent: what is installed is kept, an engine that answers on the socket is left running.
set -euo pipefail

prefix=/opt/atom-build/docker26
plugin_dir=/usr/local/lib/docker/cli-plugins
name=docker
if [[ ${1:-} == --side ]]; then
  name=${2:?usage: install-docker.sh [--side NAME]}
  [[ $name =~ ^[a-z0-9][a-z0-9-]*$ && $name != docker ]] || { echo "--side NAME: lower-case letters, digits, '-'; not 'docker'" >&2; exit 2; }
fi

if [[ $name == docker ]]; then
  sock=/run/docker.sock data=/var/lib/docker exec_root=/run/docker pidfile=/run/docker.pid
  conf=/etc/docker/daemon.json log=/var/log/dockerd.log
else
  sock=/run/$name.sock data=/var/lib/$name exec_root=/run/$name pidfile=/run/$name.pid
  conf=/etc/$name/daemon.json log=/var/log/$name.log
fi

# Debian 12's own packages: runc (the runtime), mmdebstrap (the offline stand-in base), curl.
need_apt=()
command -v runc >/dev/null || need_apt+=(runc)
command -v mmdebstrap >/dev/null || need_apt+=(mmdebstrap)
command -v curl >/dev/null || need_apt+=(curl)
if ((${#need_apt[@]})); then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

# Debian 13's docker.io, containerd and docker-buildx, unpacked (not installed: their dependencies are trixie's).
trixie_download() {  # DIR PACKAGE...: the .deb files of PACKAGEs from the trixie suite into DIR
  local work=$1; shift
  mkdir -p "$work/sources" "$work/lists/partial"
  # The first stanza of Debian's own sources file, pointed at trixie.
  awk 'BEGIN{RS="";ORS="\n\n"} NR==1' /etc/apt/sources.list.d/debian.sources \
    | sed -E 's/^Suites:.*/Suites: trixie/' > "$work/sources/trixie.sources"
  local apt_opts=(-oAPT::Sandbox::User=root -oDir::Etc::SourceList=/dev/null -oDir::Etc::SourceParts="$work/sources" -oDir::State::Lists="$work/lists")
  apt-get "${apt_opts[@]}" update -qq
  (cd "$work" && apt-get "${apt_opts[@]}" download "$@" >/dev/null)
}
if [[ ! -x $prefix/usr/sbin/dockerd || ! -x $prefix/usr/bin/docker || ! -x $prefix/usr/bin/containerd || ! -x $plugin_dir/docker-buildx ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  chmod 0755 "$work"  # apt's sandbox user reads and writes there
  trixie_download "$work" docker.io docker-cli containerd docker-buildx
  mkdir -p "$prefix.partial" "$plugin_dir"
  for deb in "$work"/docker.io_*.deb "$work"/docker-cli_*.deb "$work"/containerd_*.deb; do dpkg-deb -x "$deb" "$prefix.partial"; done
  rm -rf "$prefix" && mv "$prefix.partial" "$prefix"
  dpkg-deb -x "$work"/docker-buildx_*.deb "$work/buildx"
  install -m 0755 "$(find "$work/buildx" -type f -path "*/cli-plugins/docker-buildx" | head -n1)" "$plugin_dir/docker-buildx"
fi
# The CLI: keep one that is there (any current client talks to a 26 engine), else Debian 13's.
command -v docker >/dev/null || install -m 0755 "$prefix/usr/bin/docker" /usr/local/bin/docker

export DOCKER_HOST=unix://$sock
if ! docker info >/dev/null 2>&1; then
  mkdir -p "$(dirname "$conf")" "$data"
  [[ -f $conf ]] || printf '{"features": {"containerd-snapshotter": true}}\n' > "$conf"
  side_args=()
  # A second engine gets its own everything; its managed containerd lives under its exec root and data root.
  [[ $name == docker ]] || side_args=(--exec-root "$exec_root" --pidfile "$pidfile" --data-root "$data")
  # PATH: dockerd starts the containerd and shim found first (trixie's), and the runc of Debian 12.
  PATH=$prefix/usr/sbin:$prefix/usr/bin:$PATH nohup "$prefix/usr/sbin/dockerd" --config-file "$conf" \
    -H "unix://$sock" --iptables=false --bridge=none "${side_args[@]}" >"$log" 2>&1 &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || { echo "dockerd did not answer on $sock within 60 s; see $log" >&2; exit 1; }
fi
if [[ $(docker info --format '{{json .DriverStatus}}') != *containerd.snapshotter* ]]; then
  echo "warning: the engine on $sock ($(docker version --format '{{.Server.Version}}')) has no containerd image store:" \
       "it was running before this script and is left as it is; builds there are not reproducible" >&2
fi
echo "DOCKER_HOST=unix://$sock"
docker version --format 'docker engine {{.Server.Version}}, containerd {{range .Server.Components}}{{if eq .Name "containerd"}}{{.Version}}{{end}}{{end}}'
docker info --format 'storage driver {{.Driver}} {{json .DriverStatus}}'
docker buildx version
