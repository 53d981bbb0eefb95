"""The GPU code of built offline images, per arch, before the clean step (what aiter's wheel carries: kept + left
out) and after (the image), and the seconds the payload reader takes over the whole image, run in a container.

    python benchmarks/bench_payload.py IMAGE [IMAGE ...]   # images build-clean made (they hold payload-left-out.json)

Records the "payload" row of results.json. Needs the engine; reads each image in a throw-away container.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from results_file import record  # noqa: E402

SCAN = ("PYTHONPATH=/r python -m validation.payload scan $(ls -d /opt /usr/lib /usr/local/lib 2>/dev/null) "
        "--json-file /tmp/m.json 2>/dev/null && cat /tmp/m.json && echo && cat /opt/atom-build/payload-left-out.json")


def measure(image: str) -> dict:
    argv = ["docker", "run", "--rm", "--network", "none", "-v", f"{ROOT / 'validation'}:/r/validation:ro",
            "--entrypoint", "sh", image, "-c", SCAN]
    start = time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout  # noqa: S603
    wall = time.monotonic() - start
    manifest_text, left_text = out.split("\n}\n", 1)
    m, left = json.loads(manifest_text + "\n}"), json.loads(left_text)
    after = {a: r["bytes"] for a, r in m["archs"].items()}
    before = dict(after)
    for arch, row in left["left_out_by_arch"].items():
        before[arch] = before.get(arch, 0) + row["bytes"]
    return {"image": image, "target": left["target"], "before_bytes": before, "after_bytes": after,
            "files_read": m["files_read"], "scan_wall_s": round(wall, 2)}


def main(images: list[str]) -> int:
    rows = [measure(i) for i in images]
    record(ROOT / "benchmarks" / "results.json", "payload", {
        "date": datetime.date.today().isoformat(), "command": "python benchmarks/bench_payload.py " + " ".join(images),
        "engine": subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,  # noqa: S607
                                 text=True, check=True).stdout.strip(),
        "checkout": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,  # noqa: S607
                                   check=True, cwd=ROOT).stdout.strip(),
        "result": rows})
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
