"""Compare a backend's output with an fp32 reference: cosine, max abs error, share out of tolerance."""

from __future__ import annotations

from dataclasses import dataclass

import torch

COSINE_MIN = 0.999
# Share of elements allowed outside atol + rtol*|ref|; bf16 output rounding alone is ~0.4% relative.
MAX_FRAC_OUT_OF_TOL = 0.01
RTOL = 0.02
ATOL_REL = 0.02  # atol as a fraction of the reference's RMS, so the check is scale-free


@dataclass(frozen=True)
class Comparison:
    cosine: float
    max_abs_err: float
    frac_out_of_tol: float
    nan_inf: bool

    @property
    def passed(self) -> bool:
        return (not self.nan_inf) and self.cosine > COSINE_MIN and self.frac_out_of_tol <= MAX_FRAC_OUT_OF_TOL

    def why(self) -> str:
        if self.nan_inf:
            return "NaN/Inf in output"
        if self.cosine <= COSINE_MIN:
            return f"cosine {self.cosine:.6f} <= {COSINE_MIN}"
        if self.frac_out_of_tol > MAX_FRAC_OUT_OF_TOL:
            return f"{self.frac_out_of_tol:.2%} of elements out of tolerance (max {MAX_FRAC_OUT_OF_TOL:.0%})"
        return ""


def compare(out: torch.Tensor, ref: torch.Tensor) -> Comparison:
    """Metrics in float64 on the CPU; non-finite outputs are flagged, and zeroed only for the numbers."""
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: out {tuple(out.shape)} vs ref {tuple(ref.shape)}")
    o = out.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    nan_inf = bool((~torch.isfinite(o)).any())
    # Zeroing keeps the JSON finite; nan_inf alone already fails the case.
    o = torch.where(torch.isfinite(o), o, torch.zeros_like(o))
    diff = (o - r).abs()
    denom = o.norm() * r.norm()
    cosine = float((o * r).sum() / denom) if denom > 0 else (1.0 if o.norm() == r.norm() else 0.0)
    atol = ATOL_REL * float(r.pow(2).mean().sqrt()) if r.numel() else 0.0
    out_of_tol = diff > (atol + RTOL * r.abs())
    frac = float(out_of_tol.double().mean()) if r.numel() else 0.0
    return Comparison(cosine, float(diff.max()) if r.numel() else 0.0, frac, nan_inf)
