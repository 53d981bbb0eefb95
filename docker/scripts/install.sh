#!/bin/sh
# install.sh COMMON REQUIREMENTS deps|no-deps [ARCH]: fill /opt/venv from the wheels image, zero compilation.
# COMMON is /wheels/common (its installer/ and installer.txt hold uv and its hash), ARCH an extra --find-links
# folder. Every wheel is hash-checked (--require-hashes), binary only, no index. uv installs when the wheels image
# carries it (pip installs that one file, hash-checked, into /tmp/uv, removed afterwards); pip otherwise. Bytecode
# is compiled as pip does (the image sets PYTHONDONTWRITEBYTECODE: without .pyc every start would compile). Then
# the installer's own `pip check` proves the venv consistent. No cache is left behind.
set -eu
# Hash-checked .pyc (py_compile's default when SOURCE_DATE_EPOCH is set, for uv's compile step and pip's): valid
# whatever a source file's time says, and the RUN's clamp_times.py sets every time to the build's SOURCE_DATE_EPOCH.
export SOURCE_DATE_EPOCH=315532800
common=$1 reqs=$2 mode=$3 arch=${4:-}
links="--find-links $common"
if [ -n "$arch" ]; then links="$links --find-links $arch"; fi
nodeps="" compile="--compile-bytecode"
# A layer on top of another (no-deps) compiles only its own files (compile_new.py: the RECORDs of what it installed):
# uv would recompile the whole venv and copy every lower layer's bytecode into this one.
if [ "$mode" = no-deps ]; then nodeps="--no-deps" compile=""; fi
if [ -s "$common/installer.txt" ]; then
  pip install --quiet --no-index --no-deps --only-binary=:all: --require-hashes \
    --find-links "$common/installer" --target /tmp/uv -r "$common/installer.txt"
  # shellcheck disable=SC2086
  # hardlink: uv unpacks each wheel into its temporary cache on this same file system and links the files into
  # the venv instead of copying them again (the cache folder is deleted; the venv keeps the only links).
  UV_NO_CACHE=1 UV_LINK_MODE=hardlink UV_PYTHON_DOWNLOADS=never /tmp/uv/bin/uv --no-config pip install \
    --python /opt/venv/bin/python --no-index $links --only-binary :all: --require-hashes $compile \
    $nodeps -r "$reqs"
  if [ -z "$compile" ]; then
    /opt/venv/bin/python "$(dirname "$0")/compile_new.py" "$reqs" \
      "$(/opt/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  fi
  /tmp/uv/bin/uv --no-config pip check --python /opt/venv/bin/python
  rm -rf /tmp/uv
  # uv stamps each dist-info with uv_cache.json (a timestamp): two builds of one closure would differ.
  python "$(dirname "$0")/collect_wheels.py" scrub-uv --site "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
else
  # shellcheck disable=SC2086
  pip install --no-index $links --only-binary=:all: --require-hashes $nodeps -r "$reqs"
  pip check
fi
rm -rf /root/.cache
