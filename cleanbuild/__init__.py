"""Host-side orchestration for clean, validated ATOM images: plan, build, validate, smoke test, tag, report."""

__version__ = "0.1.0"
