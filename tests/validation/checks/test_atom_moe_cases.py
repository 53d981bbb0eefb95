"""ATOM's CK-free expert layer as the patch writes it into the real ATOM at the pin (patches apply on a copy of its
moe.py), run by the moe-triton check on the CPU (aiter's Triton kernels at the pin under the interpreter) against the
per-expert fp32 loop; a layer that computes something else fails, an ATOM without the patch is skipped by name."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.validation.conftest import REPO
from validation.checks import atom_moe_cases, moe_triton
from validation.checks.report import FAILED, PASSED, SKIPPED

MOE = "atom/model_ops/moe.py"


def atom_with(tmp_path, site, patched: bool):
    (tmp_path / MOE).parent.mkdir(parents=True)
    shutil.copyfile(site / MOE, tmp_path / MOE)
    if patched:
        subprocess.run([sys.executable, "-m", "patches", "apply", "--root", str(tmp_path), "--only",  # noqa: S603
                        "atom-ck-free-triton-moe"], cwd=REPO, check=True, capture_output=True, timeout=120)
    return tmp_path / "atom"


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_the_patched_layer_matches_the_fp32_loop(site, aiter_pkg, interpreter_runs_aiter, cpu_ctx, tmp_path, arch):
    atom = atom_with(tmp_path, site, patched=True)
    ctx = cpu_ctx(arch, aiter_root=aiter_pkg, aiter_from_source=True)
    cases = atom_moe_cases.cases(ctx, moe_triton.CPU_SHAPES, moe_triton._inputs, atom)
    assert [c.status for c in cases] == [PASSED] * len(moe_triton.CPU_SHAPES), [c.note for c in cases]
    assert all(c.cosine > 0.999 and str(tmp_path) in c.note for c in cases)


def test_an_atom_without_the_patch_is_skipped_naming_it(site, aiter_pkg, cpu_ctx, tmp_path):
    atom = atom_with(tmp_path, site, patched=False)
    cases = atom_moe_cases.cases(cpu_ctx(aiter_root=aiter_pkg, aiter_from_source=True), moe_triton.CPU_SHAPES,
                                 moe_triton._inputs, atom)
    assert [c.status for c in cases] == [SKIPPED] and "atom-ck-free-triton-moe" in cases[0].note


def test_a_layer_that_drops_the_routing_weights_fails(aiter_pkg, interpreter_runs_aiter, cpu_ctx, tmp_path):
    """A hand-written layer, not ATOM's: the experts' mean instead of the routed sum."""
    (tmp_path / MOE).parent.mkdir(parents=True)
    (tmp_path / MOE).write_text(
        "def ck_free_triton_experts(hidden_states, w1, w2, topk_weight, topk_ids, activation=None, expert_mask=None):\n"
        "    h = torch.einsum('th,enh->eth', hidden_states.float(), w1.float())\n"
        "    g, u = h.chunk(2, dim=-1)\n"
        "    return torch.einsum('eti,ehi->th', torch.nn.functional.silu(g) * u, w2.float()) / w1.shape[0]\n")
    ctx = cpu_ctx(aiter_root=aiter_pkg, aiter_from_source=True)
    cases = atom_moe_cases.cases(ctx, moe_triton.CPU_SHAPES[:1], moe_triton._inputs, tmp_path / "atom")
    assert [c.status for c in cases] == [FAILED]
