"""The patches, in the order they run (two of them share aiter/tuned_gemm.py)."""

from __future__ import annotations

from patches.catalog import (
    atom_ck_free_native_act,
    atom_ck_free_native_topk,
    atom_ck_free_triton_gemm,
    atom_ck_free_triton_moe,
    atom_ck_free_triton_norm,
    jit_core_runtime_error,
    no_asm_gemm_gfx950,
    tuned_gemm_hipblaslt,
)
from patches.engine import Patch

PATCHES: tuple[Patch, ...] = (
    tuned_gemm_hipblaslt.PATCH,
    no_asm_gemm_gfx950.PATCH,
    jit_core_runtime_error.PATCH,
    atom_ck_free_triton_gemm.PATCH,
    atom_ck_free_triton_moe.PATCH,  # these four after the GEMM patch, which gives envs.py its ATOM_CK_FREE
    atom_ck_free_triton_norm.PATCH,
    atom_ck_free_native_act.PATCH,
    atom_ck_free_native_topk.PATCH,
)


def by_name() -> dict[str, Patch]:
    return {patch.name: patch for patch in PATCHES}
