#!/bin/sh
# Create a venv with the base image's own Python (any version). Debian/Ubuntu bases without ensurepip get
# python3-venv from apt first; this adds no compiler. Run under with-ca.sh so apt trusts a proxy's CA.
set -eu
# ensurepip compiles pip's own .pyc: hash-checked with SOURCE_DATE_EPOCH (py_compile's default then), else they
# carry this build's time and two builds of one venv differ (measured: 491 of pip's .pyc, 2026-12-01).
export SOURCE_DATE_EPOCH=315532800
venv=$1
if ! python3 -m venv "$venv" 2>/dev/null; then
  rm -rf "$venv"
  sh "$(dirname "$0")/apt-install.sh" python3-venv
  python3 -m venv "$venv"
fi
