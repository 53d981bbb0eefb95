"""ATOM's CK-free reroutes as the patches write them into the real ATOM at the pin (patches apply on a copy of its
moe.py and layernorm.py), run by the atom-reroutes check on the CPU (aiter's Triton kernels at the pin under the
interpreter) against fp32 references; a function that computes something else fails, an ATOM without the patches is
skipped by name, a host without ATOM too."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.validation.conftest import REPO
from validation.checks import atom_reroutes
from validation.checks.report import FAILED, PASSED, SKIPPED

FILES = ("atom/model_ops/moe.py", "atom/model_ops/layernorm.py", "atom/model_ops/activation.py",
         "atom/model_ops/topK.py")
PATCHES = ("atom-ck-free-triton-moe", "atom-ck-free-triton-norm", "atom-ck-free-native-act", "atom-ck-free-native-topk")


@pytest.fixture
def atom_at(site, tmp_path, monkeypatch):
    """atom_at(patched) -> ATOM's two files at the pin in a folder on sys.path, as an image's site-packages."""

    def make(patched: bool):
        for name in FILES:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(site / name, tmp_path / name)
        (tmp_path / "atom" / "__init__.py").write_text("")
        if patched:
            subprocess.run([sys.executable, "-m", "patches", "apply", "--root", str(tmp_path), "--only",  # noqa: S603
                            *PATCHES], cwd=REPO, check=True, capture_output=True, timeout=120)
        monkeypatch.syspath_prepend(str(tmp_path))
        return tmp_path / "atom"

    return make


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_the_patched_functions_match_fp32(atom_at, aiter_pkg, interpreter_runs_aiter, cpu_ctx, arch):
    atom = atom_at(patched=True)
    result = atom_reroutes.run(cpu_ctx(arch, aiter_root=aiter_pkg, aiter_from_source=True))
    names = [c.name.split(" ")[0] for c in result.cases]
    assert names.count("ck_free_triton_experts") == 3 and names.count("ck_free_rmsnorm") == 3
    assert names.count("ck_free_rmsnorm_with_add") == 3 and names.count("SiluAndMul.forward_native") == 3
    assert names.count("ck_free_topk_softmax") == 3
    assert [c.status for c in result.cases] == [PASSED] * 15, [c.note for c in result.cases]
    assert all(c.cosine > 0.999 and str(atom) in c.note for c in result.cases)


def test_an_atom_without_the_patches_is_skipped_naming_them(atom_at, aiter_pkg, cpu_ctx):
    atom_at(patched=False)
    result = atom_reroutes.run(cpu_ctx(aiter_root=aiter_pkg, aiter_from_source=True))
    assert [c.status for c in result.cases] == [SKIPPED] * 4
    assert [p in c.note for c, p in zip(result.cases, PATCHES, strict=True)] == [True] * 4


def test_no_atom_here_is_one_skip(aiter_pkg, cpu_ctx):
    result = atom_reroutes.run(cpu_ctx(aiter_root=aiter_pkg, aiter_from_source=True))
    assert [(c.status, c.note) for c in result.cases] == [(SKIPPED, "ATOM is not installed here")]


def test_functions_that_compute_something_else_fail(aiter_pkg, interpreter_runs_aiter, cpu_ctx, tmp_path,
                                                    monkeypatch):
    """Hand-written stand-ins, not ATOM's: the experts' mean instead of the routed sum, a norm without its weight,
    SiLU on the wrong half, a router that keeps the k smallest."""
    (tmp_path / "atom" / "model_ops").mkdir(parents=True)
    (tmp_path / "atom" / "__init__.py").write_text("")
    (tmp_path / FILES[0]).write_text(
        "def ck_free_triton_experts(hidden_states, w1, w2, topk_weight, topk_ids, activation=None, expert_mask=None):\n"
        "    h = torch.einsum('th,enh->eth', hidden_states.float(), w1.float())\n"
        "    g, u = h.chunk(2, dim=-1)\n"
        "    return torch.einsum('eti,ehi->th', torch.nn.functional.silu(g) * u, w2.float()) / w1.shape[0]\n")
    (tmp_path / FILES[1]).write_text(
        "def ck_free_rmsnorm(x, weight, eps, dim):\n"
        "    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)\n\n\n"
        "def ck_free_rmsnorm_with_add(x, weight, residual, eps, dim):\n"
        "    return ck_free_rmsnorm(x, weight, eps, dim), x + residual\n")
    (tmp_path / FILES[2]).write_text(
        "# atom-build(atom-ck-free-native-act): a stand-in\n"
        "class SiluAndMul:\n"
        "    def forward_native(self, x, x_scale=None):\n"
        "        x, y = x.chunk(2, -1)\n"
        "        return x * F.silu(y)\n")
    (tmp_path / FILES[3]).write_text(
        "def ck_free_topk_softmax(gating_output, topk, renormalize, num_fused_shared_experts=0):\n"
        "    w, ids = torch.topk(torch.softmax(gating_output.float(), -1), topk, largest=False)\n"
        "    return w / w.sum(-1, keepdim=True), ids.to(torch.int32)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    result = atom_reroutes.run(cpu_ctx(aiter_root=aiter_pkg, aiter_from_source=True))
    assert {c.name.split(" ")[0]: c.status for c in result.cases} == {
        "ck_free_triton_experts": FAILED, "ck_free_rmsnorm": FAILED, "ck_free_rmsnorm_with_add": FAILED,
        "SiluAndMul.forward_native": FAILED, "ck_free_topk_softmax": FAILED}
