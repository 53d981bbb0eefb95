import datetime as dt

import pytest

from cleanbuild.core.spec import today
from cleanbuild.images.tag import (
    MAX_LEN,
    TagParts,
    is_valid,
    make_tag,
    safe_field,
)


def tag(user="alice", date="20261129", rocm="7.2.0", aiter="0.1.7.post2.dev18", atom="0.1.0"):
    return make_tag(TagParts(user, date, rocm, aiter, atom))


def test_convention():
    assert tag().value == "alice_20261129_rocm7.2.0_aiter0.1.7.post2.dev18_atom0.1.0"


def test_local_versions_and_odd_users_are_made_safe_deterministically():
    t = tag(user="Dr. Who/ü_x", aiter="0.1.8+g0123abc", atom="1.0.0+rocm7.2.local_build")
    assert t.value == "Dr.-Who-x_20261129_rocm7.2.0_aiter0.1.8-g0123abc_atom1.0.0-rocm7.2.local-build"
    assert t.value == tag(user="Dr. Who/ü_x", aiter="0.1.8+g0123abc", atom="1.0.0+rocm7.2.local_build").value
    assert any("user name" in s for s in t.steps)


@pytest.mark.parametrize("user", ["-dash", ".dot", "___", "", "日本", "a" * 300, "x y\tz\n", "../../etc"])
def test_hostile_users_still_give_valid_tags(user):
    value = tag(user=user).value
    assert is_valid(value), value
    assert value[0] not in ".-"


def test_missing_versions():
    assert tag(rocm=None, atom="").value == "alice_20261129_rocmna_aiter0.1.7.post2.dev18_atomna"


def test_too_long_shortens_commit_hashes_first():
    long_hash = "0123456789abcdef0123456789abcdef01234567"
    t = tag(user="build-farm-user", aiter=f"0.1.8.dev100+g{long_hash}", atom=f"0.2.0.dev3+g{long_hash}")
    assert len(t.value) <= MAX_LEN and is_valid(t.value)
    assert "g0123456_" in t.value and t.value.endswith("g0123456")
    assert t.steps[-1] == "commit hashes shortened to 7 characters"
    assert t.value.startswith("build-farm-user_")  # the user was not touched


def test_too_long_without_hashes_cuts_user_then_longest_field():
    t = tag(user="u" * 60, aiter="1." + "9" * 120)
    assert len(t.value) <= MAX_LEN and is_valid(t.value)
    assert "user name cut to 16 characters" in t.steps
    assert any("longest field cut" in s for s in t.steps)
    # Still deterministic, and a different long value gives a different tag.
    assert t.value == tag(user="u" * 60, aiter="1." + "9" * 120).value
    assert t.value != tag(user="u" * 60, aiter="1." + "8" * 120).value


@pytest.mark.parametrize("text,expected", [("7.2.0", "7.2.0"), ("a+b", "a-b"), ("--x--", "x"), (None, "na"), ("+++", "na")])
def test_safe_field(text, expected):
    assert safe_field(text) == expected


def test_is_valid_rules():
    assert is_valid("a" * 128) and not is_valid("a" * 129)
    assert not is_valid("-a") and not is_valid(".a") and not is_valid("a:b") and not is_valid("")


def test_today_format():
    assert today(dt.datetime(2026, 3, 4, tzinfo=dt.UTC)) == "20260304"
