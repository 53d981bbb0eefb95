"""The else-branch rule: which statements sit on one arch's special branch."""

from __future__ import annotations

import ast
import textwrap

import pytest

from patches.finders import arch_branch, walk_with_ancestors

# code with one statement `x = 1`; whether that statement is an arch's special case
CASES = [
    ('if gfx == "gfx1250":\n    x = 1', True),
    ('if gfx == "gfx1250" and not scaleAB:\n    pass\nelse:\n    x = 1', False),  # aiter main, 2026-08
    ('if gfx != "gfx1250":\n    x = 1', False),
    ('if gfx != "gfx1250":\n    pass\nelse:\n    x = 1', True),
    ('if get_gfx() not in ("gfx942", "gfx950"):\n    pass\nelse:\n    x = 1', True),
    ("if not is_gfx1250():\n    x = 1", False),
    ("if not is_gfx1250():\n    pass\nelse:\n    x = 1", True),
    ("if skinny_traps(gfx, M):\n    x = 1", True),  # a predicate that reads the arch
    ('if gfx == "gfx1250" or force_triton:\n    x = 1', False),  # reached on any arch when forced
    ('if gfx in ("gfx942", "gfx950") and M <= 4:\n    x = 1', True),
    ("if M <= 4:\n    x = 1", False),
    ('if gfx == "gfx1250":\n    pass\nelif M == 1:\n    x = 1', False),
    ('if gfx == "gfx1250":\n    pass\nelif gfx == "gfx90a":\n    x = 1', True),
    ('if gfx == "gfx1250":\n    pass\nelif gfx == "gfx90a":\n    pass\nelse:\n    x = 1', False),
    ('if not default_config:\n    if gfx == "gfx1250":\n        x = 1', True),
    ('match gfx:\n    case "gfx1250":\n        x = 1', True),
    ('match gfx:\n    case "gfx1250":\n        pass\n    case _:\n        x = 1', False),
]


@pytest.mark.parametrize(("code", "special"), CASES, ids=[c.replace("\n", " ")[:60] for c, _ in CASES])
def test_arch_branch(code, special):
    tree = ast.parse(textwrap.dedent(code))
    chain = next((*a, n) for n, a in walk_with_ancestors(tree) if isinstance(n, ast.Assign))
    assert (arch_branch(chain) is not None) is special
