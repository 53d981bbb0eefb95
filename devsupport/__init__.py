"""What the tests and the benchmarks share, so that neither imports the other: the real aiter and ATOM as a mirror
(upstream.py), offline plans and images forgotten by key (builds.py), tiny git repositories (gitrepos.py), an
aiter-like history (fake_aiter.py) and commits on the real aiter pin (aiter_commits.py).

Developer tooling, not product: the wheel holds only cleanbuild, and no image's build context holds this folder
(.dockerignore sends an allow-list). It imports cleanbuild and the standard library, never tests/ or benchmarks/
(tests/test_devsupport.py checks both ways).
"""
