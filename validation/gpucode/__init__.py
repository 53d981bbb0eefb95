"""The GPU code a tree carries, read from its bytes: AMDGPU code objects, clang offload bundles, and kernel
libraries named per arch.

Standard library only (zstd-compressed bundles are opened with `compression.zstd` or `zstandard` where the Python
has one, and listed as unreadable where it has neither). Runs on the host, inside an image (`python -m
validation.payload`: validation/payload.py) and inside a build step (the clean layer prunes with it). Nothing here
reads a whole file: ELF headers, section headers and the bundle headers inside `.hip_fatbin`, each bounded.
"""

SCHEMA = 1
