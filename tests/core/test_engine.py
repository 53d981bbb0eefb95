"""cleanbuild.core.engine without an engine: the error boundary (every SDK or transport error -> one line and a fixed
exit code), containers removed in `finally`, and run specs handed to the SDK as they are (a ':' in a host path)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest
import requests

import docker
from cleanbuild.commands import audit_image
from cleanbuild.core import engine, metadata
from cleanbuild.core.errors import EnvironmentProblem, StepFailed, UsageError
from cleanbuild.core.spec import RunSpec
from cleanbuild.images import reproduce


@engine._boundary
def raises(exc: Exception):
    raise exc


@pytest.mark.parametrize("exc,kind,code,text", [
    (docker.errors.ImageNotFound("No such image: atom:nope"), UsageError, 2, "image not found: No such image: atom:nope"),
    (docker.errors.APIError("500 Server Error", explanation="invalid reference format"), StepFailed, 1,
     "the Docker engine refused raises: invalid reference format."),
    (requests.ConnectionError("Connection aborted"), EnvironmentProblem, 3,
     "the Docker engine failed during raises (ConnectionError: Connection aborted)"),
    (docker.errors.DockerException("Error while fetching server API version"), EnvironmentProblem, 3,
     "the Docker engine failed during raises (DockerException"),
])
def test_sdk_errors_leave_the_boundary_as_one_line_with_a_fixed_code(exc, kind, code, text):
    with pytest.raises(kind) as info:
        raises(exc)
    assert (info.value.exit_code, "\n" in str(info.value), str(info.value).startswith(text)) == (code, False, True)


def test_our_own_errors_pass_the_boundary_unchanged():
    error = UsageError("mine")
    with pytest.raises(UsageError) as info:
        raises(error)
    assert info.value is error


def test_an_unreachable_engine_is_an_environment_problem(monkeypatch):
    def from_env(**kwargs):
        raise docker.errors.DockerException("Error while fetching server API version")

    monkeypatch.setattr(docker, "from_env", from_env)
    with pytest.raises(EnvironmentProblem, match=r"the Docker engine is not reachable \(DockerException\)"):
        engine.client()


# ---- fakes of the SDK objects the engine module uses ----------------------------------------------------------

class FakeContainer:
    def __init__(self, log: list, archive: bytes | BaseException = b"", start_error: Exception | None = None):
        self.log, self.archive, self.start_error = log, archive, start_error

    def get_archive(self, path):
        if isinstance(self.archive, BaseException):
            raise self.archive
        return [self.archive], {}

    def start(self):
        self.log.append("start")
        if self.start_error:
            raise self.start_error

    def wait(self, timeout):
        return {"StatusCode": 3}

    def logs(self, stdout, stderr):
        return b"out \xff\n"

    def remove(self, force, **kwargs):
        self.log.append("remove" + ("+volumes" if kwargs.get("v") else ""))


class FakeClient:
    def __init__(self, container: FakeContainer):
        self.container = container
        self.created: list[tuple] = []
        self.containers = self

    def create(self, image, command=None, **kwargs):
        self.created.append((image, command, kwargs))
        return self.container


def tar_of(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_read_file_returns_the_bytes_and_removes_its_container():
    log: list = []
    client = FakeClient(FakeContainer(log, tar_of("versions.json", b'{"schema": 2}')))
    assert engine.read_file(client, "img", metadata.VERSIONS_PATH, "run-1") == b'{"schema": 2}'
    assert log == ["remove"] and client.created[0][2]["labels"] == {metadata.RUN_LABEL: "run-1"}


def test_read_file_of_an_absent_path_is_none_and_removes_its_container():
    log: list = []
    client = FakeClient(FakeContainer(log, docker.errors.NotFound("no such file")))
    assert (engine.read_file(client, "img", "/nope", "r"), log) == (None, ["remove"])


def test_read_file_removes_its_container_when_interrupted():
    log: list = []
    client = FakeClient(FakeContainer(log, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        engine.read_file(client, "img", "/x", "r")
    assert log == ["remove"]


def test_read_json_of_garbage_is_a_usage_error():
    client = FakeClient(FakeContainer([], tar_of("v.json", b"{not json")))
    with pytest.raises(UsageError, match="img:/opt/atom-build/versions.json is not valid JSON"):
        engine.read_json(client, "img", metadata.VERSIONS_PATH, "r")


SPEC = RunSpec(step="smoke", name="atom-smoke-r1", command=("python", "smoke.py"),
               mounts=(("/models/llama:8b", "/model", "ro"),), env=(("A", "1"),), run_id="r1")


def test_run_container_returns_exit_code_and_decoded_logs_and_removes_it(capsys):
    log: list = []
    result = engine.run_container(FakeClient(FakeContainer(log)), "img", SPEC)
    assert (result.exit_code, result.logs, log) == (3, "out \ufffd\n", ["start", "remove"])


def test_a_container_that_fails_to_start_is_removed(capsys):
    log: list = []
    client = FakeClient(FakeContainer(log, start_error=docker.errors.APIError("error gathering device information")))
    with pytest.raises(StepFailed, match="the Docker engine refused run_container"):
        engine.run_container(client, "img", SPEC)
    assert log == ["start", "remove"]


def test_a_host_path_with_a_colon_is_mounted_as_it_is(capsys):
    client = FakeClient(FakeContainer([]))
    engine.run_container(client, "img", SPEC)
    kwargs = client.created[0][2]
    assert [(m["Source"], m["Target"], m["ReadOnly"]) for m in kwargs["mounts"]] == [("/models/llama:8b", "/model", True)]
    assert (kwargs["labels"], kwargs["name"], kwargs["network_mode"]) == ({metadata.RUN_LABEL: "r1"}, "atom-smoke-r1", "none")


def test_gpu_settings_apply_only_to_gpu_specs():
    gpu = {"devices": ["/dev/kfd:/dev/kfd"], "group_add": ["992"], "environment": {"HIP_VISIBLE_DEVICES": "0"}}
    cpu = engine._sdk_kwargs(SPEC, gpu)
    on_gpu = engine._sdk_kwargs(RunSpec(**{**SPEC.__dict__, "gpu": True}), gpu)
    assert ("devices" in cpu, cpu["environment"]) == (False, {"A": "1"})
    assert (on_gpu["group_add"], on_gpu["environment"]) == (["992"], {"A": "1", "HIP_VISIBLE_DEVICES": "0"})


class PushingImages:
    def __init__(self, lines):
        self.lines = lines

    def push(self, repo, tag, stream, decode):
        return iter(self.lines)


class PushingClient:
    def __init__(self, lines):
        self.images = PushingImages(lines)


DIGEST = "sha256:892d20479a1f822c75eb74f95b3485cccad6ef2d22d17870909c0c24b0ae8d30"


@pytest.mark.parametrize("lines", [
    # the classic store (Docker 20.10): an aux record
    [{"status": "Pushed", "id": "800c77b09733"}, {"status": "t1: digest: " + DIGEST + " size: 561"},
     {"progressDetail": {}, "aux": {"Tag": "t1", "Digest": DIGEST, "Size": 561}}],
    # the containerd store (Docker 26.1.5, as it answered here): the status line only
    [{"status": "The push refers to repository [127.0.0.1:5000/x/y]"}, {"status": "Pushed", "id": "800c77b09733"},
     {"status": "t1: digest: " + DIGEST + " size: 561"}],
])
def test_push_returns_the_digest_either_store_reports(lines):
    assert engine.push(PushingClient(lines), "127.0.0.1:5000/x/y:t1") == DIGEST


MISSING = [{"error": "missing content: content digest sha256:07967f: not found Note: You're trying to push a "
                     "manifest list/index which references multiple platform specific manifests, but not all of them "
                     "are available locally or available to the remote repository."}]


class PulledClient(PushingClient):
    """An image pulled from 127.0.0.1:5000/a (the registry holds it there) and tagged for 127.0.0.1:5000/b: the
    containerd store lists a digest for both names, and its push fails for the attestation manifest it never
    fetched (Docker 26.1.5's words)."""

    def __init__(self, held: set[str]):
        super().__init__(MISSING)
        self.held = held
        self.api = self
        self.images.get_registry_data = self.registry_data

    def inspect_image(self, ref):
        return {"RepoDigests": [f"127.0.0.1:5000/b@{DIGEST}", f"127.0.0.1:5000/a@{DIGEST}"]}

    def registry_data(self, ref):
        if ref not in self.held:
            raise docker.errors.NotFound(ref)
        return type("Data", (), {"id": DIGEST})()


def test_a_pulled_image_the_engine_cannot_push_is_copied_in_the_registry_from_where_it_came(monkeypatch):
    ran = []
    monkeypatch.setattr(engine, "run", lambda argv, **kw: ran.append(argv) or type("R", (), {"returncode": 0})())
    client = PulledClient({f"127.0.0.1:5000/a@{DIGEST}", "127.0.0.1:5000/b:t1"})
    assert engine.push(client, "127.0.0.1:5000/b:t1") == DIGEST
    assert ran == [["docker", "buildx", "imagetools", "create", "--tag", "127.0.0.1:5000/b:t1", f"127.0.0.1:5000/a@{DIGEST}"]]


def test_missing_content_with_no_copy_in_the_registry_is_one_line(monkeypatch):
    monkeypatch.setattr(engine, "run", lambda argv, **kw: pytest.fail("nothing to copy from"))
    with pytest.raises(StepFailed, match=r"^push of 127.0.0.1:5000/b:t1 failed: missing content"):
        engine.push(PulledClient(set()), "127.0.0.1:5000/b:t1")


class _Image:
    def __init__(self, image_id: str, tags: tuple[str, ...], created: str, key: str = "k1"):
        self.id, self.tags = image_id, list(tags)
        self.attrs = {"Created": created, "Config": {"Labels": {engine.KEY_LABEL: key, engine.UNIT_LABEL: "venv"}}}


class _Images:
    """What the engine's image list answers for one unit and key: several images where builds are not
    reproducible (each rebuild of the key a new ID), listed in the engine's own (unspecified) order."""

    def __init__(self, images):
        self.images, self.filters = images, None

    def list(self, filters):
        self.filters = filters
        return [i for i in self.images if f"{engine.KEY_LABEL}={i.attrs['Config']['Labels'][engine.KEY_LABEL]}"
                in filters["label"]]

    def get(self, name):
        import docker

        found = [i for i in self.images if name in i.tags]
        if not found:
            raise docker.errors.ImageNotFound(name)
        return found[0]


class _Cli:
    def __init__(self, images):
        self.images = _Images(images)


OLDER = _Image("sha256:old", ("atom-build/venv:k1",), "2026-12-01T10:00:00Z")
NEWER = _Image("sha256:new", ("127.0.0.1:5000/x/venv:k1",), "2026-12-01T11:00:00Z")


def test_find_by_key_keeps_the_name_on_the_image_that_has_it():
    """A name never moves to another image of the same key: what was built FROM it keeps the same bytes. The
    named image is asked for by name: no listing of every image (slow on the containerd store)."""
    client = _Cli([NEWER, OLDER])
    assert engine.find_by_key(client, "venv", "k1", "atom-build/venv:k1")[0] == "sha256:old"
    assert client.images.filters is None


def test_find_by_key_lists_by_label_when_the_name_holds_another_key():
    moved = _Image("sha256:moved", ("atom-build/venv:k1",), "2026-12-01T12:00:00Z", key="k2")
    client = _Cli([NEWER, moved])
    assert engine.find_by_key(client, "venv", "k1", "atom-build/venv:k1")[0] == "sha256:new"
    assert client.images.filters == {"label": [f"{engine.KEY_LABEL}=k1", f"{engine.UNIT_LABEL}=venv"]}


def test_find_by_key_without_the_name_takes_the_newest_whatever_the_order():
    for order in ([NEWER, OLDER], [OLDER, NEWER]):
        assert engine.find_by_key(_Cli(order), "venv", "k1", "atom-build/venv:other")[0] == "sha256:new"


def test_find_by_key_finds_nothing_when_no_image_has_the_key():
    assert engine.find_by_key(_Cli([]), "venv", "k1", "atom-build/venv:k1") is None
    assert engine.images_by_key(_Cli([OLDER, NEWER]), "venv", "k1") == [
        ("sha256:new", ("127.0.0.1:5000/x/venv:k1",)), ("sha256:old", ("atom-build/venv:k1",))]


SEALED = RunSpec(step="audit", name="atom-audit-r1-python", command=("python", "-m", "validation.audit"),
                 mounts=(("/src/validation", "/opt/atom-audit/validation", "ro"),), workdir="/opt/atom-audit")


def test_a_sealed_run_is_read_only_root_without_entrypoint_and_removes_its_volumes(capsys):
    log: list = []
    client = FakeClient(FakeContainer(log))
    result = engine.run_container(client, "any/image", SEALED, sealed=True)
    kwargs = client.created[0][2]
    assert (kwargs["read_only"], kwargs["entrypoint"], kwargs["user"], kwargs["security_opt"]) == (
        True, [], "0:0", ["no-new-privileges"])
    assert (result.exit_code, log) == (3, ["start", "remove+volumes"])
    assert capsys.readouterr().err.startswith("+ docker run --rm --read-only --tmpfs /tmp --entrypoint '' --user 0:0")


def test_a_sealed_run_of_a_missing_executable_is_missing_executable_and_removed(capsys):
    log: list = []
    error = docker.errors.APIError('exec: "python": executable file not found in $PATH')
    with pytest.raises(engine.MissingExecutable):
        engine.run_container(FakeClient(FakeContainer(log, start_error=error)), "img", SEALED, sealed=True)
    assert log == ["start", "remove+volumes"]


def test_audit_tries_the_next_python_name_when_one_is_missing(capsys):
    error = docker.errors.APIError('exec: "python": executable file not found in $PATH')
    assert audit_image.run_sealed(FakeClient(FakeContainer([], start_error=error)), "img", SEALED) is None


def test_venv_records_come_from_the_last_line_the_image_prints(capsys):
    class Printing(FakeContainer):
        def wait(self, timeout):
            return {"StatusCode": 0}

        def logs(self, stdout, stderr):
            return b'a warning on stderr\n{"records": {}, "files": ["bin/python"]}\n'

    client = FakeClient(Printing([]))
    assert reproduce.venv_facts(client, "clean:img") == {"records": {}, "files": ["bin/python"]}
    assert (client.created[0][1][:2], client.created[0][2]["network_mode"]) == (["python", "-c"], "none")


def test_missing_content_where_the_registry_is_gone_is_the_push_error(monkeypatch):
    client = PulledClient(set())

    def gone(ref):
        raise docker.errors.APIError("Get http://127.0.0.1:5000/v2/: connection refused")

    client.images.get_registry_data = gone
    with pytest.raises(StepFailed, match=r"^push of 127.0.0.1:5000/b:t1 failed: missing content"):
        engine.push(client, "127.0.0.1:5000/b:t1")


# ---- what changed since the last build: the image tagged here last, not the newest by Created ------------------

class FakeImage:
    def __init__(self, key: str, inputs: dict | str, created: str, tagged: str | None, tags: tuple[str, ...] = ()):
        self.labels = {engine.KEY_LABEL: key, engine.INPUTS_LABEL: inputs if isinstance(inputs, str) else json.dumps(inputs)}
        self.attrs = {"Created": created, **({"Metadata": {"LastTagTime": tagged}} if tagged is not None else {})}
        self.tags = list(tags) or [f"atom-build/wheel-atom:{key}"]


class FakeImages:
    def __init__(self, images: list[FakeImage]):
        self.images, self.filters = images, None

    def list(self, filters: dict) -> list[FakeImage]:
        self.filters = filters
        return self.images


def last_inputs(*images: FakeImage, variant: str = ""):
    client = type("Cli", (), {})()
    client.images = FakeImages(list(images))
    return engine.last_inputs(client, "atom", variant, "K-now"), client.images.filters


REPRODUCIBLE = "1980-01-01T00:00:00Z"


@pytest.mark.parametrize("images,expected", [
    # reproducible builds all carry SOURCE_DATE_EPOCH: the one tagged here last wins, whatever the list order
    ([FakeImage("K1", {"ATOM_REF": "a1"}, REPRODUCIBLE, "2026-12-02T05:07:48.7Z"),
      FakeImage("K2", {"ATOM_REF": "a2"}, REPRODUCIBLE, "2026-12-02T05:07:48.786267096Z")], "a2"),
    # a BuildKit 0.8 cache hit keeps its first build's Created, older than what was built here before it
    ([FakeImage("K1", {"ATOM_REF": "a1"}, "2026-12-02T04:00:00Z", "2026-12-02T04:30:00Z"),
      FakeImage("K2", {"ATOM_REF": "a2"}, "2026-12-01T10:00:00Z", "2026-12-02T05:00:00Z")], "a2"),
    # times in another zone compare as times (11:00+07:00 is 04:00Z), not as text
    ([FakeImage("K2", {"ATOM_REF": "a2"}, REPRODUCIBLE, "2026-12-02T11:00:00+07:00"),
      FakeImage("K1", {"ATOM_REF": "a1"}, REPRODUCIBLE, "2026-12-02T04:30:00Z")], "a1"),
    # never tagged (Go's zero time, or none): Created decides; the image of the current key is never "the last"
    ([FakeImage("K-now", {"ATOM_REF": "now"}, "2026-12-03T00:00:00Z", "2026-12-03T00:00:00Z"),
      FakeImage("K1", {"ATOM_REF": "a1"}, "2026-12-01T00:00:00Z", "0001-01-01T00:00:00Z"),
      FakeImage("K2", {"ATOM_REF": "a2"}, "2026-12-02T00:00:00Z", None)], "a2"),
    # unreadable inputs are skipped, not fatal
    ([FakeImage("K2", "not json", REPRODUCIBLE, "2026-12-02T06:00:00Z"),
      FakeImage("K1", {"ATOM_REF": "a1"}, REPRODUCIBLE, "2026-12-02T05:00:00Z")], "a1"),
])
def test_last_inputs_come_from_the_other_build_tagged_here_last(images, expected):
    found, filters = last_inputs(*images)
    assert found == {"ATOM_REF": expected}
    assert filters == {"label": [f"{engine.UNIT_LABEL}=atom"]}


def test_no_other_build_means_no_last_inputs():
    assert last_inputs(FakeImage("K-now", {"ATOM_REF": "now"}, REPRODUCIBLE, None))[0] is None


def test_a_variants_last_build_is_the_last_image_tagged_for_that_variant():
    """aiter for gfx950 after a gfx942 build: what changed since gfx950's own last build, whatever was tagged later
    (a registry host's port is not the tag; an image every variant shares counts for each it is tagged for)."""
    images = [FakeImage("K942", {"ATOM_REF": "b"}, REPRODUCIBLE, "2026-12-02T06:00:00Z",
                        ("127.0.0.1:5000/x/wheel-aiter:gfx942-ck-K942",)),
              FakeImage("K950", {"ATOM_REF": "a"}, REPRODUCIBLE, "2026-12-02T05:00:00Z",
                        ("127.0.0.1:5000/x/wheel-aiter:gfx950-ckfree-K950", "atom-build/wheel-aiter:gfx942-ck-K950")),
              FakeImage("K-other", {"ATOM_REF": "c"}, REPRODUCIBLE, "2026-12-02T07:00:00Z",
                        ("atom-build/wheel-aiter:gfx950-ck-K-other",))]
    assert last_inputs(*images, variant="gfx950-ckfree")[0] == {"ATOM_REF": "a"}
    assert last_inputs(*images, variant="gfx942-ck")[0] == {"ATOM_REF": "b"}
    assert last_inputs(*images, variant="gfx942-ckfree")[0] is None


def test_an_image_removed_while_the_engine_lists_them_is_listed_again():
    """A matrix's variants build at once: the SDK lists IDs and then inspects each, and an image another variant's
    thread removed in between raised ImageNotFound, which ended that variant's build (bench run, 2026-12-03)."""
    import docker

    class Racing(FakeImages):
        def __init__(self, images, races: int):
            super().__init__(images)
            self.races, self.calls = races, 0

        def list(self, filters: dict) -> list[FakeImage]:
            self.calls += 1
            if self.calls <= self.races:
                raise docker.errors.ImageNotFound("No such image: sha256:8845")
            return super().list(filters)

    client = type("Cli", (), {})()
    client.images = Racing([FakeImage("K1", {"ATOM_REF": "a1"}, REPRODUCIBLE, "2026-12-02T05:00:00Z")], races=1)
    assert engine.last_inputs(client, "atom", "", "K-now") == {"ATOM_REF": "a1"} and client.images.calls == 2
    client.images = Racing([], races=99)  # an engine that never stops racing: the one-line error, not a loop
    with pytest.raises(UsageError, match="image not found"):
        engine.last_inputs(client, "atom", "", "K-now")
    assert client.images.calls == 5
