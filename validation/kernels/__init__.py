"""Our own Triton kernels: small, readable, and enough to prove the image's Triton toolchain works."""
