"""cleanbuild.core.refs: the one check for what reaches git or names an image; patches/upstream.py's stdlib copy agrees."""

from __future__ import annotations

import pytest

from cleanbuild.core import refs
from cleanbuild.core.errors import UsageError
from patches import upstream

GOOD_REFS = ["79366eb81451e20bc206f63ab56cae8c63c927ed", "main", "HEAD", "v0.1.19.post1", "refs/pull/4465/head",
             "release/internal/3.5.x", "79366eb8"]
BAD_REFS = ["", "-", "--upload-pack=touch x", "-n", "a..b", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[", "a\\b",
            "x.lock", "x.lock/y", "@", "/x", "x/", "x.", ".x", "a/.b", "a@{1}", "a//b", "a\tb", "a\x7f"]


@pytest.mark.parametrize("ref", GOOD_REFS)
def test_a_sha_or_a_ref_name_passes(ref):
    assert refs.git_ref(ref, "--to") == ref


@pytest.mark.parametrize("ref", BAD_REFS)
def test_what_git_could_read_as_an_option_or_rejects_is_refused(ref):
    with pytest.raises(UsageError, match="is not a commit SHA or a git ref name"):
        refs.git_ref(ref, "--to")


@pytest.mark.parametrize("ref", GOOD_REFS + BAD_REFS)
def test_the_image_side_copy_decides_the_same(ref):
    try:
        refs.git_ref(ref, "x")
        host = True
    except UsageError:
        host = False
    try:
        upstream.check_ref(ref, "x")
        image = True
    except upstream.NotFound:
        image = False
    assert image == host


@pytest.mark.parametrize("url", ["https://github.com/ROCm/aiter.git", "ssh://git@host/x.git", "git@github.com:ROCm/aiter.git",
                                 "/work/shared/upstream/aiter.git", "../shared/upstream/atom.git", "file:///srv/x.git"])
def test_repositories_git_may_be_pointed_at(url):
    assert refs.git_remote(url, "repo") == url


@pytest.mark.parametrize("url", ["", "-x", "--upload-pack=touch x", "ext::sh -c touch% x", "fd::3", "foo://x",
                                 "https://host/a\nb"])
def test_options_and_command_transports_are_not_repositories(url):
    with pytest.raises(UsageError, match="is not a repository URL or path"):
        refs.git_remote(url, "repo")


@pytest.mark.parametrize("ref", ["atom-build/clean:gfx950-ckfree-25f0bea15b17", "rocm/dev-ubuntu-24.04:7.2-complete",
                                 "registry.example:5000/atom-build/candidate@sha256:" + "a" * 64,
                                 "localhost:5000/x:y", "127.0.0.1:5000/a/b:c", "18661587900a", "sha256:" + "b" * 64])
def test_image_references(ref):
    assert refs.image_ref(ref, "IMAGE") == ref


@pytest.mark.parametrize("ref", ["", "-rf", "Bad Ref!", "UPPER/case:x", "a/b@sha256:abc", "a:b:c", "a/-b",
                                 "x" * 256])
def test_what_is_not_an_image_reference(ref):
    with pytest.raises(UsageError, match="is not an image reference"):
        refs.image_ref(ref, "IMAGE")


@pytest.mark.parametrize(("ref", "want"), [
    ("atom-gfx942:dev-1", ("atom-gfx942", "dev-1", "")),
    ("atom-gfx942", ("atom-gfx942", "", "")),
    ("127.0.0.1:5000/atom-build/atom-gfx942:dev-1", ("127.0.0.1:5000/atom-build/atom-gfx942", "dev-1", "")),
    ("127.0.0.1:5000/atom-build/atom-gfx942", ("127.0.0.1:5000/atom-build/atom-gfx942", "", "")),
    ("rocm/dev-ubuntu-24.04@sha256:" + "a" * 64, ("rocm/dev-ubuntu-24.04", "", "sha256:" + "a" * 64)),
    ("localhost:5000/x:7.2-complete@sha256:" + "b" * 64, ("localhost:5000/x", "7.2-complete", "sha256:" + "b" * 64)),
])
def test_an_image_reference_splits_into_repository_tag_and_digest(ref, want):
    assert refs.parse_image(ref) == want


def test_split_image_is_repository_and_tag():
    assert refs.split_image("registry.example:443/a/b:t@sha256:" + "c" * 64) == ("registry.example:443/a/b", "t")
