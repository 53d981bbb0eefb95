import pytest

from cleanbuild.core.versions import normalise, rocm_minor, rocm_version


@pytest.mark.parametrize(("text", "want"), [("7.2.0", "7.2"), ("7.2", "7.2"), ("7.2.0.70200-43~24.04", "7.2"),
                                           ("07.02.1", "7.2"), ("rocm", None), (None, None)])
def test_rocm_minor_comes_from_the_same_parser(text, want):
    assert rocm_minor(text) == want


@pytest.mark.parametrize("raw,expected", [
    ("6.4.1.60401-83~24.04", "6.4.1"),
    ("7.2.0", "7.2.0"),
    ("7.2", "7.2.0"),
    ("7.2.0-43~24.04\n", "7.2.0"),
    ("07.02.1", "7.2.1"),
    ("garbage", None),
    ("", None),
    (None, None),
])
def test_rocm_version_never_crashes(raw, expected):
    assert rocm_version(raw) == expected


@pytest.mark.parametrize("raw,expected", [
    ("2.11.0+rocm7.2", "2.11.0+rocm7.2"),
    ("1.0.0-RC1", "1.0.0rc1"),
    ("0.1.7.post2.dev18", "0.1.7.post2.dev18"),
    ("v3.6.0", "3.6.0"),
    ("not a version", "not a version"),
    (" ", None),
])
def test_normalise(raw, expected):
    assert normalise(raw) == expected
