#!/bin/sh
# apt-get install PACKAGE... (no recommends), then remove what apt and dpkg keep of the run that is not the
# packages: the lists, the binary caches (pkgcache.bin and srcpkgcache.bin hold the lists' times: two cold builds
# of builder-git differed in var/cache/apt/pkgcache.bin, measured on Docker 26.1.5 on 2026-12-02), the logs (dated
# lines) and ldconfig's aux-cache (inode and time stamps). Run under with-ca.sh so apt trusts a proxy's CA.
set -eu
apt-get ${APT_CA_OPT:-} update
DEBIAN_FRONTEND=noninteractive apt-get ${APT_CA_OPT:-} install -y --no-install-recommends "$@"
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/log/alternatives.log \
  /var/cache/ldconfig/aux-cache
