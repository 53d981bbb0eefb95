"""Are two builds of the same inputs the same? Compare two wheels images and two clean images built apart.

Same manifest bytes (every wheel's sha256), same installed file list and RECORD hashes in the venv. Image IDs may
still differ, and the comparison says why: BuildKit 0.8 (Docker 20.10's) stamps files a RUN creates with the time
of the build (the .pyc uv compiles, the files write_versions writes) and records each layer's creation time in the
image config. BuildKit >= 0.13 removes both with a SOURCE_DATE_EPOCH build argument and the image exporter's
rewrite-timestamp=true; this engine's BuildKit predates that, so there the digests are not a test of the closure.
"""

from __future__ import annotations

import json

from . import engine

RECORDS = r"""
import importlib.metadata as md, json, os
records = {}
for d in md.distributions():
    text = d.read_text("RECORD") or ""
    records[d.metadata["Name"]] = sorted(line.rsplit(",", 2)[0] + "," + line.rsplit(",", 2)[1]
                                         for line in text.splitlines() if line and "__pycache__" not in line)
files = sorted(os.path.relpath(os.path.join(d, f), "/opt/venv") for d, _, fs in os.walk("/opt/venv") for f in fs
               if "__pycache__" not in d)
print(json.dumps({"records": records, "files": files}))
"""
WHY = ("image IDs differ only where BuildKit 0.8 stamps build-time mtimes on the files a RUN creates (compiled .pyc, "
       "versions.json) and creation times into the image config; BuildKit >= 0.13 removes both with the "
       "SOURCE_DATE_EPOCH build argument and --output type=image,rewrite-timestamp=true, which Docker 20.10's "
       "BuildKit lacks")


def venv_facts(cli, image: str) -> dict:
    out = cli.containers.run(image, ["python", "-c", RECORDS], network_mode="none", remove=True, stdout=True,
                             stderr=False)
    return json.loads(out)


def compare(cli, wheels: tuple[str, str], clean: tuple[str, str]) -> dict:
    manifests = [engine.read_file(cli, image, "/wheels/manifest.json") for image in wheels]
    venvs = [venv_facts(cli, image) for image in clean]
    ids = [engine.image_id(cli, image) for image in clean]
    layers = [engine.layers(cli, image) for image in clean]
    differing = sorted(name for name in set(venvs[0]["records"]) | set(venvs[1]["records"])
                       if venvs[0]["records"].get(name) != venvs[1]["records"].get(name))
    return {
        "manifests_identical": manifests[0] == manifests[1] and manifests[0] is not None,
        "files_identical": venvs[0]["files"] == venvs[1]["files"],
        "records_identical": not differing, "records_differing": differing,
        "distributions": len(venvs[0]["records"]), "files": len(venvs[0]["files"]),
        "clean_ids_identical": ids[0] == ids[1], "clean_ids": ids,
        "layers_shared": sum(a == b for a, b in zip(*layers, strict=False)), "layers": len(layers[0]),
        "why_ids_differ": None if ids[0] == ids[1] else WHY,
    }
