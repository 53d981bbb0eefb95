#!/usr/bin/env bash
# Starts Debian's docker-registry (the distribution registry 2.8) on 127.0.0.1:${1:-5000}, storage under
# /var/lib/atom-build-registry, no auth: the integration tier's registry. The engine treats 127.0.0.0/8 as an
# insecure registry by default, so plain HTTP works without daemon configuration.
set -euo pipefail
port=${1:-5000}
command -v docker-registry >/dev/null || {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
}
if curl -fsS "http://127.0.0.1:${port}/v2/" >/dev/null 2>&1; then
  echo "registry already answers on 127.0.0.1:${port}"
  exit 0
fi
conf=/etc/atom-build-registry.yml
cat > "$conf" <<YAML
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: /var/lib/atom-build-registry}
  delete: {enabled: true}
http: {addr: "127.0.0.1:${port}"}
YAML
nohup docker-registry serve "$conf" >/var/log/atom-build-registry.log 2>&1 &
for _ in $(seq 1 30); do
  curl -fsS "http://127.0.0.1:${port}/v2/" >/dev/null 2>&1 && { echo "registry on 127.0.0.1:${port}"; exit 0; }
  sleep 1
done
echo "docker-registry did not answer on 127.0.0.1:${port}; see /var/log/atom-build-registry.log" >&2
exit 1
