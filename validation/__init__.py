"""Backend validation kernels, arch and config checks for ATOM/aiter images.

Runs inside the image and on any host with torch; needs only the standard library, torch, numpy and
triton (rich optional). Never imports the host package `cleanbuild`.

The root holds the programs, thin entry points: `python -m validation` (cli.py), `validation.serve`,
`validation.audit`, `validation.payload` and `validation.tritoncache`. The sub-packages are their layers, lowest
first (docs/architecture.md, "Image-side layers"): core; aiterpkg, gpucode, kernels; warmcache; checks, probes.
"""

__version__ = "0.1.0"
