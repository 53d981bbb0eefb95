"""benchmarks/buildkit_log.py: the seconds a BuildKit plain-progress log gives its image export, which the build
and export benchmarks record per unit. The logs below are written by hand in the shape BuildKit prints."""

from __future__ import annotations

from pathlib import Path

from tests.support.scripts import load_bench

buildkit_log = load_bench("buildkit_log")

CONTAINERD = """\
#8 [venv 2/2] RUN t0=$(date +%s%N) && sh install.sh
#8 0.412 Installed 71 packages
#8 DONE 27.2s

#9 exporting to image
#9 exporting layers
#9 exporting layers 23.4s done
#9 naming to moby-dangling@sha256:059b done
#9 unpacking to moby-dangling@sha256:059b 0.0s done
#9 DONE 23.5s
"""

CLASSIC = """\
#7 [builder 2/2] RUN apt-get install -y git
#7 DONE 5.0s

#8 exporting to image
#8 exporting layers 0.4s done
#8 writing image sha256:1f7d done
#8 naming to docker.io/atom-build/builder:96ea done
#8 DONE 0.5s
"""

CACHED = """\
#5 [venv 2/2] RUN sh install.sh
#5 CACHED
"""


def test_the_export_is_the_image_vertex_alone_not_the_steps_before_it() -> None:
    assert buildkit_log.exporting_seconds(CONTAINERD) == 23.5
    assert buildkit_log.exporting_seconds(CLASSIC) == 0.5


def test_a_log_without_an_export_says_so() -> None:
    assert buildkit_log.exporting_seconds(CACHED) is None
    assert buildkit_log.exporting_seconds("#1 exporting to image\n") is None  # an export that never finished


def test_each_units_export_is_read_from_its_own_log(tmp_path: Path) -> None:
    (tmp_path / "venv.log").write_text(CONTAINERD)
    (tmp_path / "builder.log").write_text(CLASSIC)
    (tmp_path / "torch.log").write_text(CACHED)
    found = buildkit_log.exports(tmp_path, ["venv", "builder", "torch", "mori"])
    assert found == {"venv": 23.5, "builder": 0.5}
