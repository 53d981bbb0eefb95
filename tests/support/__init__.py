"""Helpers shared by tests (fixture builders)."""
