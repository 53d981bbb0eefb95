"""Every `docker buildx build` command line, assembled here and nowhere else: the builds and the wheels export
(cleanbuild.images.buildx), what `invoke plan` and --dry-run print (cleanbuild.images.plan.commands,
buildx.describe) and the export benchmark. A BuildSpec (cleanbuild.core.spec) is the data of one build; this module
turns it, the request's options (builder, progress, CA bundle) and where the result goes into argv. Pure.

The other buildx commands are no builds and stay where their answer is read: `docker buildx version` and
`docker buildx inspect BUILDER` in the engine's preflight (cleanbuild.core.engine.preflight), `docker buildx
imagetools create` in cleanbuild.core.engine.registry_copy and `docker buildx imagetools inspect` in
cleanbuild.images.attest.
"""

from __future__ import annotations

from pathlib import Path

from cleanbuild.core.refs import split_image
from cleanbuild.core.spec import BuildSpec
from cleanbuild.request.build import Build

# Every file a build writes and the image config carry this time: 1980-01-01, the earliest a zip (a wheel) holds.
SOURCE_DATE_EPOCH = 315532800


def argv(spec: BuildSpec, options: Build, output: tuple[str, ...], *, labels: tuple[tuple[str, str], ...] = (),
         cache: tuple[str, ...] = (), tagged: bool = True) -> list[str]:
    """One build of spec. output: where the image goes (load, image_store or local below); labels: --label pairs;
    cache: cache_flags; tagged: named spec.image (an export to a folder has no image to name)."""
    out = ["docker", "buildx", "build", *(("--builder", options.request.builder) if options.request.builder else ()),
           "--progress", options.request.progress, "--network", "host", "-f", str(spec.dockerfile)]
    out += ["--target", spec.target] if spec.target else []
    for key, value in spec.build_args:
        out += ["--build-arg", f"{key}={value}"]
    for key, value in labels:
        out += ["--label", f"{key}={value}"]
    out += ["--secret", f"id=ca,src={options.request.ca_bundle}"] if options.request.ca_bundle else []  # never a build argument
    out += [*cache, *output]
    return [*out, *(("-t", spec.image) if tagged else ()), str(spec.context)]


def own_engine(dockerfile: Path, context: Path, output: tuple[str, ...], *,
               labels: tuple[tuple[str, str], ...] = ()) -> list[str]:
    """A build on the engine's own BuildKit of a context that holds everything it reads (the stand-in base: FROM
    scratch and a tar). No --builder: every other build starts FROM its image, so it must be in this engine, as
    the stand-in always was; no CA bundle: nothing is fetched; plain progress: its output goes to a log."""
    out = ["docker", "buildx", "build", "--progress", "plain", "-f", str(dockerfile)]
    for key, value in labels:
        out += ["--label", f"{key}={value}"]
    return [*out, *output, str(context)]


def load(iidfile: Path | None = None) -> tuple[str, ...]:
    """Into the engine's image store, its ID written to iidfile (Docker 20.10's BuildKit 0.8: the --load path)."""
    return ("--load", *(("--iidfile", str(iidfile)) if iidfile else ()))


def image_store(metadata: Path) -> tuple[str, ...]:
    """What makes a build's bytes a function of its inputs: the config's and history's times set to
    SOURCE_DATE_EPOCH, no provenance (BuildKit's records the build's start and end); the image goes straight into
    the engine's containerd image store (cleanbuild.images.imagestore), its descriptor into the metadata file. The
    files' times are the Dockerfiles' own work: every RUN ends with docker/scripts/clamp_times.py and every COPY
    copies a folder whose time that set, so there is no rewrite-timestamp pass (it decompressed, re-tarred and
    recompressed every new layer, 64 s of a cold build, and the image exporter refuses it with the containerd
    store). New layers are zstd-compressed (benchmarks/bench_export.py), in OCI media types (Docker's have no
    zstd); Docker >= 23 and containerd >= 1.5 pull zstd."""
    return ("--build-arg", f"SOURCE_DATE_EPOCH={SOURCE_DATE_EPOCH}", "--provenance=false",
            "--metadata-file", str(metadata), "--output", "type=image,oci-mediatypes=true,compression=zstd")


def local(dest: Path) -> tuple[str, ...]:
    """The final stage's files into a folder (the wheels export)."""
    return ("--output", f"type=local,dest={dest}")


def cache_flags(spec: BuildSpec, options: Build, *, containerd_store: bool = False) -> tuple[str, ...]:
    """Build cache through the registry. The docker driver (the engine's own BuildKit) with the classic image store
    can only export the cache inline, in the image it pushes (the final image's layers); with the containerd image
    store, or on a docker-container or remote builder, every stage's cache goes to the registry (mode=max): `auto`
    takes that when the engine has the containerd store. Inline, each build reads the content-keyed image and its
    stem's `-latest` tag, so a changed key still starts from the last build's layers."""
    if options.request.cache == "none" or (options.request.cache == "auto" and not options.remote):
        return ()
    repo, tag = split_image(spec.image)
    stem = tag.rsplit("-", 1)[0]
    if options.request.cache == "registry" or (options.request.cache == "auto" and containerd_store and options.request.builder is None):
        ref = f"type=registry,ref={repo}:{stem}-buildcache"
        return ("--cache-from", ref, "--cache-to", f"{ref},mode=max")
    return ("--cache-to", "type=inline", "--cache-from", spec.image, "--cache-from", f"{repo}:{stem}-latest")
