"""Small, checked source rewrites of aiter and ATOM (standard library only).

Run `python -m patches list` for the catalog; see patches.engine for how a
patch is planned, verified and written.
"""
