"""A hand-made aiter-like history for bisect's tests and benchmark: one commit per entry, each writing its files
(the validation tests' tuned_gemm.py variants, tests/validation/fixtures; a jit/core.py that raises RuntimeError or
SystemExit)."""

from __future__ import annotations

from pathlib import Path

from devsupport.gitrepos import commit_all, git

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "validation" / "fixtures"
JIT_FIXED = b'''def build_module(name):
    try:
        compile_it(name)
    except Exception as e:
        raise RuntimeError(f"failed to build {name}") from e
'''
JIT_EXITS = JIT_FIXED.replace(b'raise RuntimeError(f"failed to build {name}") from e',
                              b'raise SystemExit(f"failed to build {name}")')


def tuned_gemm(name: str) -> str:
    # The validation fixtures plus the module-level logger the no-asm-gemm-gfx950 patch needs (aiter has one).
    text = (FIXTURES / f"{name}.py.txt").read_text()
    return text.replace("from aiter import gemm_a16w16_asm, hipb_mm", "from aiter import gemm_a16w16_asm, hipb_mm, logger")


def history(tmp_path: Path, files_by_commit: list[dict[str, str | bytes]]) -> tuple[Path, list[str]]:
    """A repository with one commit per entry (each writes its files); returns it and the SHAs, oldest first."""
    repo = tmp_path / "fake-aiter"
    (repo / "aiter" / "configs").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for index, files in enumerate(files_by_commit):
        for path, data in {**files, "aiter/configs/NOTES": f"commit {index}\n"}.items():
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_bytes(data if isinstance(data, bytes) else data.encode())
        shas.append(commit_all(repo, f"commit {index} (#{1000 + index})"))
    return repo, shas
