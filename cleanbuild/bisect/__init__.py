"""`invoke bisect`: which upstream commit broke a patch, a validation check or ATOM's imports of aiter.

checks (what "bad" means) -> search (git bisect in a temporary repository) -> step (one commit: its package tree
exported from the repository cache, patched as the image would be, checked; or with --image, imagestep: the
commit's image built through the pipeline and validated inside) -> report.
"""
