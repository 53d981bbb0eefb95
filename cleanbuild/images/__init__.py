"""The build: the pure planner, the steps, the one executor, the record and the report (README: Where each step lives)."""
