"""The in-image audit's probes: every known ATOM/aiter pitfall, read from an image as it is.

Run inside any image with a Python 3.10+ by `python -m validation.audit --arch X|auto --json-file OUT`
(validation/audit.py; runner.py runs every probe and assembles the report), standard library only. It never imports aiter or ATOM (they need ROCm and may end the process): it finds them through
the image's Python (import specs, distribution metadata, sys.path) and reads their files. Each pitfall is one
function returning a Finding: ok, PRESENT or unknown, with the evidence (file and line, env value, package).
"""

SCHEMA = 1
