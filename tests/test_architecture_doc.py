"""docs/architecture.md stays a short map that is true of the code. Under 2,500 words. Every repository path it
writes in backticks exists: paths are written from the repository root (one that starts with "/" is a path inside an
image, one holding "<" is a pattern, `.py` is a file type). Every dotted cleanbuild, validation or patches name
resolves. Its step table is cleanbuild.images.pipeline.STEPS, in order. Its two layer lists put every sub-package of
cleanbuild/ and validation/ on exactly one floor. Each top-level folder and each of cleanbuild's sub-packages has a
section of its own."""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

from cleanbuild.images import pipeline, plan

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
PATH_ENDINGS = (".py", ".toml", ".md", ".sh")
PACKAGES = ("cleanbuild", "validation", "patches")


def text() -> str:
    return DOC.read_text()


def section(doc: str, title: str) -> str:
    return doc.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def backticked(doc: str) -> list[str]:
    """Every `...` span outside fenced code blocks."""
    prose = re.sub(r"^```.*?^```", "", doc, flags=re.M | re.S)
    return re.findall(r"`([^`\n]+)`", prose)


def repo_paths(doc: str) -> list[str]:
    """The spans that name a file or folder of the repository."""
    return [span for span in backticked(doc)
            if not re.search(r"\s", span) and not span.startswith(("/", "-")) and "<" not in span
            and not re.fullmatch(r"\.\w+", span)  # a file type: `.py`
            and ("/" in span or span.endswith(PATH_ENDINGS) or span.startswith("Dockerfile."))]


def dotted_names(doc: str) -> list[str]:
    return [span for span in backticked(doc) if re.fullmatch(rf"(?:{'|'.join(PACKAGES)})(?:\.\w+)+", span)]


def resolves(name: str) -> bool:
    """A module or package of the repository, or a name bound at the top level of one."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:cut])
        source = base / "__init__.py" if (base / "__init__.py").is_file() else base.with_suffix(".py")
        if source.is_file():
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and rest[0] in top_level_names(source))
    return False


def top_level_names(source: Path) -> set[str]:
    names = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def listed_steps(doc: str) -> list[str]:
    """The step table of "A request's path": rows "| `name` | ... |", in order."""
    return re.findall(r"^\| `(\w+)` \|", section(doc, "A request's path"), re.M)


def floors(doc: str, title: str) -> list[list[str]]:
    """A layer list's floors: "1. `core`, `x`: ..." -> ["core", "x"] (as tests/test_layers*.py read them)."""
    return [re.findall(r"`(\w+)`", line.split(":", 1)[0]) for line in section(doc, title).splitlines()
            if re.match(r"\d+\. `", line)]


def subpackages(package: str) -> list[str]:
    return sorted(p.parent.name for p in (ROOT / package).glob("*/__init__.py"))


def ignored(name: str) -> bool:
    patterns = [line.strip().strip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns)


def top_level_folders() -> set[str]:
    """The repository's own folders: hidden ones (tools' caches, .git) and what .gitignore names left out."""
    return {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and not ignored(p.name)}


def sections(doc: str) -> set[str]:
    return set(re.findall(r"^### `([^`]+)/`$", doc, re.M))


def test_it_is_under_2500_words():
    words = len(text().split())
    assert words < 2500, f"docs/architecture.md has {words} words: move detail into the modules' docstrings"


def test_every_path_it_names_exists():
    paths = repo_paths(text())
    assert "cleanbuild/images/pipeline.py" in paths  # the reader sees the paths it should
    assert sorted({p for p in paths if not (ROOT / p).exists()}) == []


def test_every_local_link_exists():
    links = re.findall(r"\]\(([^)#:]+)\)", text())
    assert links and sorted(link for link in links if not (DOC.parent / link).exists()) == []


def test_every_dotted_name_resolves():
    names = dotted_names(text())
    assert "validation.core.archs" in names
    assert sorted(n for n in names if not resolves(n)) == []


def test_the_step_table_is_the_executors_table():
    assert listed_steps(text()) == list(pipeline.STEPS)


def test_build_clean_runs_all_steps_but_dev_and_push():
    """The sentence under the step table: `dev` only with --src (the overlay route), `push` only in promote."""
    assert [s for s in pipeline.STEPS if s not in plan.STEPS] == ["dev", "push"]
    assert [s for s in pipeline.STEPS if s not in plan.DEV_STEPS] == ["push"]


def test_every_subpackage_is_on_exactly_one_floor():
    doc = text()
    host = [name for floor in floors(doc, "Layers") for name in floor]
    image = [name for floor in floors(doc, "Image-side layers")[:-1] for name in floor]  # the last: the programs
    assert sorted(host) == subpackages("cleanbuild")
    assert sorted(image) == subpackages("validation")


def test_each_folder_has_its_section():
    wanted = top_level_folders() | {".ci"} | {f"cleanbuild/{name}" for name in subpackages("cleanbuild")}
    assert "cleanbuild" in wanted and "cleanbuild/images" in wanted
    assert sections(text()) == wanted


def test_each_folder_of_the_two_packages_is_named():
    named = set(repo_paths(text()))
    folders = [f"{package}/{p.name}/" for package in ("cleanbuild", "validation") for p in (ROOT / package).iterdir()
               if p.is_dir() and not ignored(p.name)]
    assert sorted(f for f in folders if f not in named) == []
