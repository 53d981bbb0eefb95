"""Backend validation kernels, arch and config checks for ATOM/aiter images.

Runs inside the image and on any host with torch; needs only the standard library, torch, numpy and
triton (rich optional). Never imports the host package `cleanbuild`.
"""

__version__ = "0.1.0"
