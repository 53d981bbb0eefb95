"""cleanbuild.images.buildx_argv: every `docker buildx build` argv, for each place a build's result goes."""

from __future__ import annotations

from cleanbuild.images import buildx_argv
from cleanbuild.images.plan import build_spec
from tests.support.builds import VARIANTS, offline_plan
from tests.support.requests import changed


def spec_and_options(**options):
    plan = offline_plan(VARIANTS[0])
    return build_spec(plan.unit("clean")), changed(plan.options, **options)


def test_a_load_names_the_image_and_writes_its_id(tmp_path):
    spec, options = spec_and_options(ca_bundle=None)
    argv = buildx_argv.argv(spec, options, buildx_argv.load(tmp_path / "clean.iid"), labels=(("k", "v"),))
    assert argv[:3] == ["docker", "buildx", "build"] and argv[-3:] == ["-t", spec.image, str(spec.context)]
    assert argv[argv.index("--iidfile") + 1] == str(tmp_path / "clean.iid") and "--load" in argv
    assert argv[argv.index("--target") + 1] == "clean" and argv[argv.index("--label") + 1] == "k=v"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--build-arg"] == [f"{k}={v}" for k, v in spec.build_args]
    assert "--secret" not in argv and "--builder" not in argv


def test_the_ca_bundle_is_a_secret_and_the_builder_is_named(tmp_path):
    spec, options = spec_and_options(ca_bundle=tmp_path / "ca.pem", builder="farm")
    argv = buildx_argv.argv(spec, options, buildx_argv.load())
    assert argv[argv.index("--secret") + 1] == f"id=ca,src={tmp_path / 'ca.pem'}"
    assert argv[argv.index("--builder") + 1] == "farm" and "--iidfile" not in argv


def test_a_reproducible_build_goes_into_the_store_with_its_cache_and_no_load(tmp_path):
    spec, options = spec_and_options(registry="localhost:5000/ab")
    cache = buildx_argv.cache_flags(spec, options, containerd_store=True)
    argv = buildx_argv.argv(spec, options, buildx_argv.image_store(tmp_path / "m.json"), cache=cache)
    assert "--load" not in argv and argv[argv.index("--metadata-file") + 1] == str(tmp_path / "m.json")
    assert argv[argv.index("--cache-to") + 1].endswith("mode=max") and argv[-3:-1] == ["-t", spec.image]


def test_an_export_to_a_folder_names_no_image(tmp_path):
    spec, options = spec_and_options()
    argv = buildx_argv.argv(spec, options, buildx_argv.local(tmp_path), tagged=False)
    assert "-t" not in argv and "--load" not in argv
    assert argv[-3:] == ["--output", f"type=local,dest={tmp_path}", str(spec.context)]


def test_the_context_is_the_last_argument_and_the_dockerfile_is_given():
    spec, options = spec_and_options()
    argv = buildx_argv.argv(spec, options, ())
    assert (argv[-1], argv[argv.index("-f") + 1]) == (str(spec.context), str(spec.dockerfile))
