#!/bin/sh
# git-fetch.sh REPO REF DIR [--from SOURCE] [--submodules]: check out REPO at the commit REF into DIR, with the
# history setuptools_scm needs for a real version (`git describe`: the release tag and the distance to it), and only
# that. --from reads the commit and its tags from SOURCE instead (a copy of REPO: a mirror's, in the context's
# local/repos/); REPO stays the checkout's origin, so what the build records names REPO either way.
# REF must be a full commit SHA; anything else is refused (a branch or a tag moves, a pin must not).
# Over http(s) the fetch is blobless (--filter=blob:none: every commit and tree, blobs only for the checkout);
# a local path or file:// repository (the offline profile's copies) gets a plain fetch (git's file transport
# ignores filters, and a filtered clone of it would fetch lazily in a loop). --update-shallow accepts a
# shallow source. The CK submodule (and any other) is fetched at depth 1 only with --submodules.
# REPO may not start with '-' or use a `transport::` form (ext:: runs commands), and every value reaches git
# after `--`: the rule of the host's cleanbuild/core/refs.py.
set -eu
repo=$1 ref=$2 dir=$3 submodules="" from=""
shift 3
while [ $# -gt 0 ]; do
  case "$1" in
    --submodules) submodules=--submodules;;
    --from) from=${2:-}; shift;;
    *) echo "git-fetch: unknown argument $1 (usage: REPO REF DIR [--from SOURCE] [--submodules])" >&2; exit 2;;
  esac
  shift
done
from=${from:-$repo}
for source in "$repo" "$from"; do
  case "$source" in
    -*|*::*|"") echo "git-fetch: $source is not a repository URL or path (no leading '-', no transport::); fix the profile's repo" >&2; exit 2;;
  esac
done
case "$ref" in
  *[!0-9a-f]*|"") echo "git-fetch: $ref is not a full commit SHA (40 hex digits); pin a commit" >&2; exit 2;;
esac
[ ${#ref} -eq 40 ] || { echo "git-fetch: $ref is not a full commit SHA (40 hex digits); pin a commit" >&2; exit 2; }
filter="" upload_pack=""
case "$from" in
  http://*|https://*) filter="--filter=blob:none";;
  # A copy on disk that another user owns (a shared mirror, read by a build that is not root): the upload-pack git
  # runs for it checks the copy's ownership, and only a safe.directory given to that process lets it read.
  *) upload_pack="--upload-pack=git -c 'safe.directory=*' upload-pack";;
esac
git init -q -- "$dir"
cd -- "$dir"
git remote add -- origin "$repo"
if ! git -c advice.detachedHead=false fetch -q $filter ${upload_pack:+"$upload_pack"} --update-shallow --tags -- "$from" "$ref"; then
  echo "git-fetch: cannot fetch commit $ref from $from: it is not a commit of that repository, or the repository is unreachable. To fix, check the pin with \`invoke pins\`." >&2
  exit 1
fi
git -c advice.detachedHead=false checkout -q FETCH_HEAD
head=$(git rev-parse HEAD)
[ "$head" = "$ref" ] || { echo "git-fetch: $repo gave $head for $ref" >&2; exit 1; }
if [ "$submodules" = "--submodules" ]; then
  if ! git submodule update -q --init --recursive --depth 1; then
    echo "git-fetch: the submodules of $repo @ $ref could not be fetched (aiter's 3rdparty/composable_kernel is CK). To fix, use a mirror that has them, or build CK-free (--ck-free)." >&2
    exit 1
  fi
fi
echo "git-fetch: $repo @ $head ($(git describe --tags --always 2>/dev/null)), read from $from"
