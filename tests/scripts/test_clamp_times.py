"""docker/scripts/clamp_times.py and the Dockerfiles' use of it: what a RUN wrote gets the build's time, and
nothing else is touched, so a unit's layers are the same bytes on every build without a rewrite-timestamp pass.

That a rebuild from nothing gives the same digests on a real engine is tests/integration's reproducible-digest test."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from cleanbuild.images import buildx_argv
from tests.support.scripts import load_script

ct = load_script("clamp_times")
DOCKER = Path(__file__).resolve().parents[2] / "docker"
EPOCH_NS = buildx_argv.SOURCE_DATE_EPOCH * 10**9
OLD_NS = 1_600_000_000 * 10**9  # before the RUN started
SINCE_NS = 1_700_000_000 * 10**9  # the RUN's t0
NEW_NS = 1_750_000_000 * 10**9  # written by the RUN


def _at(path: Path, ns: int) -> None:
    os.utime(path, ns=(ns, ns), follow_symlinks=False)


def _mtime(path: Path) -> int:
    return path.lstat().st_mtime_ns


def _tree(root: Path) -> dict[str, Path]:
    paths = {"old": root / "lib" / "old.py", "new": root / "lib" / "new.py", "deep": root / "opt" / "venv" / "bin" / "x",
             "mount": root / "mnt" / "wheels" / "w.whl"}
    for path in paths.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(path.name)
    paths["link"] = root / "opt" / "venv" / "bin" / "python"
    paths["link"].symlink_to(paths["old"])
    for path in sorted(root.rglob("*"), key=lambda p: -len(p.parts)):
        _at(path, NEW_NS)
    for name in ("old", "mount"):
        _at(paths[name], OLD_NS)
    _at(root / "mnt" / "wheels", NEW_NS)
    _at(root, NEW_NS)
    return paths


def test_clamp_sets_what_the_run_wrote_to_the_epoch_and_leaves_older_paths_alone(tmp_path):
    paths = _tree(tmp_path)
    count = ct.clamp(str(tmp_path), SINCE_NS, EPOCH_NS, skip=set())
    assert _mtime(paths["new"]) == _mtime(paths["deep"]) == _mtime(paths["deep"].parent) == EPOCH_NS
    assert _mtime(tmp_path) == _mtime(tmp_path / "lib") == EPOCH_NS  # folders whose entries changed, the root too
    assert _mtime(paths["old"]) == OLD_NS  # a file an unzip wrote with the archive's time keeps it
    assert count == len([p for p in tmp_path.rglob("*") if _mtime(p) == EPOCH_NS]) + 1


def test_clamp_sets_a_links_own_time_not_its_targets(tmp_path):
    paths = _tree(tmp_path)
    ct.clamp(str(tmp_path), SINCE_NS, EPOCH_NS, skip=set())
    assert _mtime(paths["link"]) == EPOCH_NS
    assert paths["old"].stat().st_mtime_ns == OLD_NS


def test_clamp_neither_enters_nor_touches_a_mount_point(tmp_path):
    paths = _tree(tmp_path)
    mount = tmp_path / "mnt" / "wheels"
    _at(paths["mount"], NEW_NS)
    ct.clamp(str(tmp_path), SINCE_NS, EPOCH_NS, skip={str(mount)})
    assert _mtime(mount) == NEW_NS  # a bind mount's own folder: BuildKit's, not the layer's
    assert _mtime(paths["mount"]) == NEW_NS  # never visited
    assert _mtime(tmp_path / "mnt") == EPOCH_NS


def test_mount_points_reads_every_mount_but_the_root_with_escapes_decoded(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text("22 1 0:21 / / rw,relatime - overlay overlay rw\n"
                    "23 22 0:5 / /proc rw - proc proc rw\n"
                    "24 22 8:1 /x /tmp/atom-build-scripts ro - ext4 /dev/vda rw\n"
                    "25 22 0:30 / /run/secrets/ca ro - tmpfs tmpfs rw\n"
                    "26 22 8:1 /y /opt/with\\040space ro - ext4 /dev/vda rw\n")
    assert ct.mount_points(str(info)) == {"/proc", "/tmp/atom-build-scripts", "/run/secrets/ca", "/opt/with space"}


@pytest.mark.parametrize("argv", [[], ["abc"], ["1", "2", "3"], ["1", "x"]])
def test_main_refuses_anything_but_nanoseconds_and_an_optional_epoch(argv, capsys):
    assert ct.main(["clamp_times.py", *argv]) == 2
    assert "usage: clamp_times.py SINCE_NS" in capsys.readouterr().err


def test_the_script_and_the_build_use_one_epoch():
    assert ct.DEFAULT_EPOCH == buildx_argv.SOURCE_DATE_EPOCH


# ---- the Dockerfiles ------------------------------------------------------------------------------------------

def _instructions(path: Path) -> list[str]:
    """Each instruction on one line (continuations joined), comments left out."""
    lines, current = [], ""
    for raw in path.read_text().splitlines():
        if not current and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        current += raw.rstrip("\\").strip() + " " if raw.endswith("\\") else raw.strip()
        if not raw.endswith("\\"):
            lines.append(current)
            current = ""
    return lines


DOCKERFILES = sorted(DOCKER.glob("Dockerfile.*"))
# Its layer is empty on BuildKit >= 0.13 (the mount points it removes are gone already); BuildKit 0.8 has no
# reproducible path. The candidate's digest in the integration test covers it.
UNCLAMPED = {"RUN rm -rf /tmp/atom-build-patches /tmp/atom-build-warm"}


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_every_run_takes_t0_first_and_clamps_last(path):
    runs = [i for i in _instructions(path) if i.startswith("RUN ") and i not in UNCLAMPED]
    assert runs
    for run in runs:
        command = re.sub(r"^RUN (--mount=\S+ )*", "", run)
        assert command.startswith("t0=$(date +%s%N)"), run
        assert re.search(r'clamp_times\.py "\$t0"$', command), run


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_every_copy_copies_a_stages_folder_into_a_folder(path):
    """A COPY from the context keeps the checkout's times, and a folder a COPY creates on the way (or one a single
    file or a wildcard lands in) gets the build's clock: only `COPY --from=STAGE /dir/ /dir/` keeps every time."""
    for copy in (i for i in _instructions(path) if i.startswith("COPY ")):
        parts = copy.split()
        assert len(parts) == 4 and parts[1].startswith("--from="), copy
        assert parts[2].endswith("/") and parts[3].endswith("/") and "*" not in copy, copy


def test_the_wheels_image_starts_from_a_skeleton_of_every_folder_it_fills():
    copies = [i.split() for i in _instructions(DOCKER / "Dockerfile.wheels") if i.startswith("COPY ")]
    wheels = [c for c in copies if c[3].startswith("/wheels/")]
    assert wheels[0] == ["COPY", "--from=collect", "/skeleton/", "/wheels/"]
    # The only COPY into a folder's sub-folder comes before any COPY into that folder (one of an empty folder
    # leaves the folder's time the build's clock, and a later layer under it would hold that time).
    nested = [i for i, c in enumerate(wheels) if c[3].count("/") > 3]
    assert nested == [1], wheels
    made = {"/wheels/", "/wheels/common/", "/wheels/common/installer/", "/wheels/atom/", "/wheels/arch/"}
    assert {c[3] for c in wheels} <= made
    assert all(c[3] in ("/out/", "/wheels/") or c[3].startswith("/wheels/") for c in copies)
    assert "mkdir -p /skeleton/common/installer /skeleton/atom /skeleton/arch" in (DOCKER / "Dockerfile.wheels").read_text()


def test_main_clamps_what_was_written_up_to_a_second_before_t0(tmp_path, monkeypatch):
    """The kernel stamps times from a coarse clock: a folder made right after `date` can carry an earlier time."""
    paths = _tree(tmp_path)
    _at(paths["new"], SINCE_NS - ct.SLACK_NS // 2)  # written right after t0, stamped a tick before it
    _at(paths["old"], SINCE_NS - 2 * ct.SLACK_NS)  # below this RUN
    seen = {}
    monkeypatch.setattr(ct, "clamp", lambda root, since, epoch, skip: seen.update(since=since, epoch=epoch))
    monkeypatch.setattr(ct, "mount_points", lambda: set())
    assert ct.main(["clamp_times.py", str(SINCE_NS)]) == 0
    monkeypatch.undo()
    ct.clamp(str(tmp_path), seen["since"], seen["epoch"], skip=set())
    assert seen["epoch"] == EPOCH_NS
    assert _mtime(paths["new"]) == EPOCH_NS and _mtime(paths["old"]) == SINCE_NS - 2 * ct.SLACK_NS
