"""The build: the pure planner, the steps, the one executor, the record and the report.

docs/architecture.md, "A request's path", follows one build through them.
"""
