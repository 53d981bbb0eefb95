"""cleanbuild.upstream.imports: do ATOM's aiter imports resolve in aiter's tree? Tiny hand-written trees for every rule,
then the real repositories at the pins and at the 2026-08-22 heads."""

from __future__ import annotations

import textwrap

import pytest

from cleanbuild.upstream import imports
from cleanbuild.upstream.imports import Memo, Missing, Tree, unresolved
from tests.support.upstream import AITER_HEAD, AITER_PIN, ATOM_HEAD, ATOM_PIN, tree_at


def tree(files: dict[str, str], memo: Memo | None = None) -> Tree:
    data = {path: textwrap.dedent(text).encode() for path, text in files.items()}
    return Tree(list(data), data.get, memo or Memo())


AITER = {
    "aiter/__init__.py": "from .ops.gemm import gemm_a8w8\nVERSION = '1'\n",
    "aiter/ops/__init__.py": "",
    "aiter/ops/gemm.py": """
        import os
        from typing import Any as _Any

        def gemm_a8w8(): ...
        class Config:
            inner_attr = 1
        def helper():
            local_name = 1
        GEMM_DEFAULT: int = 1
    """,
}


def check(atom_source: str, aiter_files: dict[str, str] | None = None, path: str = "atom/model.py"):
    return unresolved(tree({path: atom_source}), tree({**AITER, **(aiter_files or {})}))


def missing(result) -> list[tuple[str, str | None]]:
    return [(m.module, m.name) for m in result.missing]


# ---- modules and names ----------------------------------------------------------------------------------------

def test_module_and_names_that_exist_resolve():
    result = check("from aiter.ops.gemm import gemm_a8w8, Config, GEMM_DEFAULT, os\nimport aiter.ops.gemm\n"
                   "from aiter import VERSION, ops\n")
    assert (result.checked, missing(result), result.undecided) == (7, [], ())


def test_a_missing_module_is_reported_as_the_module():
    result = check("x = 1\nfrom aiter.ops.gone import f\n")
    assert result.missing == (Missing("atom/model.py", 2, "aiter.ops.gone", None),)


def test_import_of_a_missing_module_is_reported():
    assert missing(check("import aiter.ops.gone\n")) == [("aiter.ops.gone", None)]


def test_a_missing_name_is_reported_with_file_and_line():
    result = check("from aiter.ops.gemm import gemm_a8w8, gemm_a4w4\n")
    assert missing(result) == [("aiter.ops.gemm", "gemm_a4w4")]
    assert str(result.missing[0]) == "aiter.ops.gemm.gemm_a4w4 (atom/model.py:1)"


@pytest.mark.parametrize("name", ["inner_attr", "local_name"])
def test_names_bound_inside_a_class_or_function_do_not_count(name):
    assert missing(check(f"from aiter.ops.gemm import {name}\n")) == [("aiter.ops.gemm", name)]


def test_a_submodule_is_an_importable_name():
    assert missing(check("from aiter.ops import gemm\n")) == []


def test_names_under_top_level_if_try_and_with_are_bound():
    aiter = {"aiter/ops/compat.py": """
        import sys
        try:
            from fast import kernel
        except ImportError:
            def kernel(): ...
        else:
            AFTER_TRY = 1
        finally:
            CLEANUP = 1
        if sys.version_info >= (3, 12):
            NEW = 1
        else:
            OLD = 1
        with open(__file__) as fh:
            TEXT = fh.read()
    """}
    result = check("from aiter.ops.compat import kernel, AFTER_TRY, CLEANUP, NEW, OLD, TEXT\n", aiter)
    assert (result.checked, missing(result)) == (6, [])


# ---- star imports ---------------------------------------------------------------------------------------------

STAR = {"aiter/ops/impl.py": "def pub(): ...\ndef _priv(): ...\n"}


def test_star_import_without_all_binds_the_public_names():
    aiter = {**STAR, "aiter/ops/__init__.py": "from aiter.ops.impl import *\n"}
    assert missing(check("from aiter.ops import pub, _priv\n", aiter)) == [("aiter.ops", "_priv")]


def test_star_import_honours_all():
    aiter = {"aiter/ops/impl.py": "__all__ = ['a', '_b']\ndef a(): ...\ndef _b(): ...\ndef c(): ...\n",
             "aiter/ops/__init__.py": "from aiter.ops.impl import *\n"}
    assert missing(check("from aiter.ops import a, _b, c\n", aiter)) == [("aiter.ops", "c")]


def test_relative_star_import():
    aiter = {**STAR, "aiter/ops/__init__.py": "from .impl import *\n"}
    assert missing(check("from aiter.ops import pub\n", aiter)) == []


def test_relative_star_import_two_levels_up():
    aiter = {"aiter/common.py": "def shared(): ...\n", "aiter/ops/sub/__init__.py": "",
             "aiter/ops/sub/mod.py": "from ..common import *\nfrom ...common import *\n",
             "aiter/ops/common.py": "def ops_shared(): ...\n"}
    assert missing(check("from aiter.ops.sub.mod import ops_shared, shared\n", aiter)) == []


def test_star_import_chain():
    aiter = {**STAR, "aiter/ops/mid.py": "from .impl import *\n", "aiter/ops/__init__.py": "from .mid import *\n"}
    assert missing(check("from aiter.ops import pub\n", aiter)) == []


def test_star_import_cycle_terminates():
    aiter = {"aiter/ops/a.py": "from .b import *\nA = 1\n", "aiter/ops/b.py": "from .a import *\nB = 1\n"}
    assert missing(check("from aiter.ops.a import A, B\n", aiter)) == []


# ---- namespace packages and dynamic modules -------------------------------------------------------------------

NAMESPACE = {"aiter/utility/dtypes.py": "fp8 = 'float8'\n"}  # aiter/utility/ has no __init__.py


def test_namespace_package_modules_resolve():
    result = check("from aiter.utility import dtypes\nimport aiter.utility.dtypes\nfrom aiter.utility.dtypes import fp8\n",
                   NAMESPACE)
    assert (result.checked, missing(result)) == (3, [])


def test_namespace_package_has_no_other_names():
    assert missing(check("from aiter.utility import fp8\n", NAMESPACE)) == [("aiter.utility", "fp8")]


LAZY = {"aiter/ops/triton/__init__.py": "def __getattr__(name):\n    return __import__(name)\n"}


def test_a_name_only_module_getattr_can_give_is_undecided_not_missing():
    result = check("from aiter.ops.triton import lazy_kernel\n", LAZY)
    assert (missing(result), [(u.module, u.name) for u in result.undecided]) == (
        [], [("aiter.ops.triton", "lazy_kernel")])


def test_a_submodule_under_a_dynamic_package_is_undecided():
    result = check("from aiter.ops.triton.gone import k\n", LAZY)
    assert (missing(result), len(result.undecided)) == ([], 1)


def test_a_meta_path_hook_makes_the_package_undecidable():
    aiter = {"aiter/ops/__init__.py": "import sys\nsys.meta_path.insert(0, object())\n"}
    result = check("from aiter.ops import anything\n", aiter)
    assert (missing(result), len(result.undecided)) == ([], 1)


# ---- what ATOM imports only optionally ------------------------------------------------------------------------

@pytest.mark.parametrize("caught", ["ImportError", "ModuleNotFoundError", "(ImportError, AttributeError)", "Exception"])
def test_imports_guarded_by_an_import_error_handler_are_skipped(caught):
    result = check(f"try:\n    from aiter.gone import x\nexcept {caught}:\n    x = None\n")
    assert (result.checked, missing(result)) == (0, [])


def test_imports_guarded_by_another_handler_are_checked():
    result = check("try:\n    from aiter.gone import x\nexcept ValueError:\n    x = None\n")
    assert missing(result) == [("aiter.gone", None)]


def test_the_handler_body_itself_is_checked():
    result = check("try:\n    import fast\nexcept ImportError:\n    from aiter.gone import fallback\n")
    assert missing(result) == [("aiter.gone", None)]


def test_type_checking_imports_are_skipped():
    result = check("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from aiter.gone import T\n")
    assert (result.checked, missing(result)) == (0, [])


def test_the_else_of_type_checking_is_checked():
    source = "import typing\nif typing.TYPE_CHECKING:\n    from aiter.gone import T\nelse:\n    from aiter.gone2 import U\n"
    assert missing(check(source)) == [("aiter.gone2", None)]


def test_the_body_of_if_not_type_checking_is_checked():
    source = "from typing import TYPE_CHECKING\nif not TYPE_CHECKING:\n    from aiter.gone import runtime_name\n"
    assert missing(check(source)) == [("aiter.gone", None)]


def test_imports_inside_functions_are_checked():
    assert missing(check("def f():\n    from aiter.gone import x\n")) == [("aiter.gone", None)]


def test_only_atoms_package_is_checked():
    assert check("from aiter.gone import x\n", path="tests/test_model.py").checked == 0


def test_relative_and_other_imports_are_not_aiter_imports():
    assert check("from .sibling import x\nimport aiterx\nfrom aiter_tools import y\n").checked == 0


def test_a_bare_except_beside_a_typed_one_guards_its_imports():
    source = "try:\n    from aiter.gone import x\nexcept ValueError:\n    pass\nexcept:\n    pass\n"
    assert missing(check(source)) == []


def test_a_file_that_does_not_parse_is_skipped():
    assert check("def (:\n").checked == 0


# ---- the memo: per-file facts by content --------------------------------------------------------------------

MEMO_AITER = {**AITER, "aiter/ops/__init__.py": "from .lim import *\n",
              "aiter/ops/lim.py": "__all__ = ['gemm_a8w8']\ndef gemm_a8w8(): ...\nclass Config: ...\n",
              "aiter/dyn.py": "def __getattr__(name): ...\n", "aiter/bad.py": "def (:\n"}
MEMO_ATOM = ("from aiter.ops import gemm_a8w8, Config\nfrom aiter.dyn import anything\nfrom aiter.bad import x\n"
             "try:\n    from aiter.gone import y\nexcept ImportError:\n    pass\n")


def memo_check(memo: Memo):
    return unresolved(tree({"atom/m.py": MEMO_ATOM}, memo), tree(MEMO_AITER, memo))


def test_a_saved_memo_answers_the_same_in_another_process_without_parsing(tmp_path, monkeypatch):
    first = Memo()
    before = memo_check(first)
    first.save(tmp_path / "memo.json")
    for parser in ("summarize", "aiter_imports"):
        monkeypatch.setattr(imports, parser, lambda *a: pytest.fail("parsed a file the memo holds"))
    assert memo_check(Memo.load(tmp_path / "memo.json")) == before
    assert (missing(before), [m.module for m in before.undecided]) == ([("aiter.ops", "Config"), ("aiter.bad", "x")],
                                                                       ["aiter.dyn"])


def test_the_same_bytes_at_two_paths_resolve_relative_to_each():
    memo = Memo()
    files = {"aiter/__init__.py": "", "aiter/a/__init__.py": "from .m import *\n", "aiter/a/m.py": "A = 1\n",
             "aiter/b/__init__.py": "from .m import *\n", "aiter/b/m.py": "B = 1\n"}
    result = unresolved(tree({"atom/m.py": "from aiter.a import A, B\nfrom aiter.b import A, B\n"}, memo),
                        tree(files, memo))
    assert missing(result) == [("aiter.a", "B"), ("aiter.b", "A")]


def test_a_file_that_changes_between_two_trees_is_read_again():
    memo = Memo()
    atom = tree({"atom/m.py": "from aiter.ops.gemm import gemm_a8w8\n"}, memo)
    assert memo_check(memo).checked == 4 and missing(unresolved(atom, tree(AITER, memo))) == []
    changed = {**AITER, "aiter/ops/gemm.py": "def other(): ...\n"}
    assert missing(unresolved(atom, tree(changed, memo))) == [("aiter.ops.gemm", "gemm_a8w8")]


# ---- the real repositories ------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def pair(upstream):
    """unresolved(ATOM at one commit, aiter at another), each tree read and each pair checked once per session."""
    trees: dict[tuple[str, str], Tree] = {}
    results = {}

    def tree_of(repo: str, ref: str) -> Tree:
        if (repo, ref) not in trees:
            trees[repo, ref] = tree_at(upstream / f"{repo}.git", ref)
        return trees[repo, ref]

    def get(atom_ref: str, aiter_ref: str):
        if (atom_ref, aiter_ref) not in results:
            results[atom_ref, aiter_ref] = unresolved(tree_of("atom", atom_ref), tree_of("aiter", aiter_ref))
        return results[atom_ref, aiter_ref]

    return get


def test_atom_pin_imports_only_what_the_aiter_pin_has(pair):
    result = pair(ATOM_PIN, AITER_PIN)
    assert result.checked > 300 and result.missing == ()


def test_atom_head_imports_names_the_aiter_pin_lacks(pair):
    found = {(m.module, m.name, m.file) for m in pair(ATOM_HEAD, AITER_PIN).missing}
    assert ("aiter.ops.batched_gemm_op_a8w8", "batched_gemm_a8w8_mxscale", "atom/models/deepseek_v4.py") in found


def test_atom_head_imports_a_module_the_aiter_pin_lacks(pair):
    found = {(m.module, m.name, m.file) for m in pair(ATOM_HEAD, AITER_PIN).missing}
    module = "aiter.ops.flydsl.kernels.mqa_logits.pa_mqa_logits_fp4_prefill"
    assert (module, None, "atom/models/deepseek_v4.py") in found


def test_atom_head_imports_only_what_aiter_head_has(pair):
    result = pair(ATOM_HEAD, AITER_HEAD)
    assert result.checked > 300 and result.missing == ()
