"""One aiter Triton launch as a case: measured against its reference, its config held to the target's LDS,
and the compile's shared memory shown next to the estimator's figure. Shared by gemm-triton and moe-triton."""

from __future__ import annotations

from collections.abc import Callable

from validation.aiterpkg import triton_ops
from validation.aiterpkg.config_lds import estimate
from validation.aiterpkg.triton_ops import Absent, AiterTriton, Launch
from validation.checks.metrics import compare
from validation.checks.report import FAILED, Case

# Why an aiter kernel stops under the interpreter: it checks tl.assume, which compiled code takes as a hint.
KNOWN_ASSUMES = {
    "gemm_a16w16": "_gemm_a16_w16_kernel assumes stride_ck > 0, gemm_a16w16 passes 0 when NUM_KSPLIT == 1",
    "gemm_a8w8_blockscale": "_gemm_a8w8_blockscale_kernel assumes stride_ck > 0, gemm_a8w8_blockscale passes 0 "
                            "when NUM_KSPLIT == 1",
}


def open_aiter(ctx, name: str) -> tuple[AiterTriton | None, list[Case]]:
    """aiter's Triton kernels for ctx, or the one case that says why not: a skip when aiter is absent here, a
    failure when an aiter that is there cannot load (that is the finding)."""
    try:
        return triton_ops.open_for(ctx), []
    except triton_ops.Unavailable as e:
        return None, [Case.skipped(name, "aiter-triton", str(e))]
    except (Exception, SystemExit) as e:  # noqa: BLE001 - aiter that cannot load is the finding
        return None, [Case.verdict(name, False, "aiter-triton", f"cannot load aiter: {type(e).__name__}: {e}")]


def _first_line(e: Exception) -> str:
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    return lines[-1].strip() if lines else type(e).__name__


def config_text(cfg: dict) -> str:
    text = (f"{cfg.get('BLOCK_SIZE_M')}x{cfg.get('BLOCK_SIZE_N')}x{cfg.get('BLOCK_SIZE_K')} "
            f"s{cfg.get('num_stages', 2)} w{cfg.get('num_warps', 4)}")
    return text + (f" ksplit{cfg['NUM_KSPLIT']}" if cfg.get("NUM_KSPLIT", 1) > 1 else "")


def run_case(at: AiterTriton, kernel: str, name: str, body: Callable[[], tuple], elem_bytes: tuple[float, float],
             note: str = "") -> tuple[Case, dict | None]:
    """body() -> (out, reference, Launch, config origin, note). A crash fails the case; this host's limits skip it."""
    # Imported here, not at the top: importing triton before the CLI sets TRITON_INTERPRET breaks the interpreter.
    from triton.compiler.errors import CompilationError
    from triton.runtime.errors import InterpreterError, OutOfResources

    try:
        out, ref, launch, origin, body_note = body()
    except InterpreterError as e:
        if "Assume failed" not in str(e):
            return Case.verdict(name, False, at.label, f"{kernel} raised InterpreterError: {e}"), None
        why = KNOWN_ASSUMES.get(kernel, "aiter's kernel assumes a condition this call breaks")
        return Case.skipped(name, at.label, "Triton's interpreter checks tl.assume, compiled code takes it as a "
                            f"hint: {why}"), None
    except OutOfResources as e:
        return Case.skipped(name, at.label, f"the target's config does not fit this device: {e}"), None
    except CompilationError as e:
        if at.backend == "hip":
            return Case.verdict(name, False, at.label, f"{kernel} does not compile: {_first_line(e)}"), None
        return Case.skipped(name, at.label, f"the target's config does not compile for {at.backend}: "
                            f"{_first_line(e)}"), None
    except Absent as e:
        return Case.skipped(name, at.label, str(e)), None
    except Exception as e:  # noqa: BLE001 - aiter's kernel failing is this case's result
        return Case.verdict(name, False, at.label, f"{kernel} raised {type(e).__name__}: {e}"), None
    case = Case.measured(name, compare(out, ref), at.label)
    row, lds_note, fits = lds_row(at, launch, elem_bytes)
    row.update(case=name, kernel=kernel, origin=origin, cosine=case.cosine, max_abs_err=case.max_abs_err)
    parts = [f"{kernel} {config_text(launch.config)} ({origin})",
             lds_note, note, body_note, case.note]
    if launch.dropped:
        parts.insert(2, "dropped AMD-only " + ", ".join(sorted(launch.dropped)))
    case.note = "; ".join(p for p in parts if p)
    if not fits:
        case.status = FAILED
    return case, row


def lds_row(at: AiterTriton, launch: Launch, elem_bytes: tuple[float, float]) -> tuple[dict, str, bool]:
    """The config against the target arch's LDS (AMD rule), and the compile's shared memory where one exists."""
    cfg = launch.config
    dims = (cfg["BLOCK_SIZE_M"], cfg["BLOCK_SIZE_N"], cfg["BLOCK_SIZE_K"])
    stages = cfg.get("num_stages", 2)
    est = estimate(*dims, *elem_bytes, stages, "amd")
    budget = at.arch.lds_bytes
    row = {"config": config_text(cfg), "dropped": sorted(launch.dropped), "lds_estimate": est, "lds_bytes": budget,
           "backend": at.backend, "compile_shared": launch.shared, "compile_estimate": None,
           "wall_s": launch.wall_s, "warm_s": launch.warm_s}
    note = f"LDS estimate {est} B of {budget} B on {at.arch.name}"
    if launch.shared:
        vendor = "amd" if at.backend == "hip" else "nvidia"
        row["compile_estimate"] = estimate(*dims, *elem_bytes, stages, vendor)
        note += (f"; compile ({at.backend}) shared {'/'.join(map(str, launch.shared))} B vs estimate "
                 f"{row['compile_estimate']} B ({vendor} rule)")
    if est > budget:
        note += f" - OVER the {at.arch.name} LDS"
    return row, note, est <= budget
