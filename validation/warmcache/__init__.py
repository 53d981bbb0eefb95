"""The image's Triton cache: the Triton kernels the image will run for its arch and model, compiled at build time
with no GPU (`python -m validation.tritoncache warm`), and the proof that a first call compiles nothing (the
validation check `first-use-compile`, `python -m validation.tritoncache check`). The command line is
validation/tritoncache.py; this package is what it runs.

- cache: warm() and check(), each on a Request: the two things done with a Triton cache.
- prove: `check` in a process of its own, for the validation check and audit's finding of the same name.

- plan: which calls, derived from code: the model's linear and MoE shapes (validation.core.models), the M values
  ATOM captures (its CUDA-graph batch sizes, read from the image's ATOM) and aiter's config buckets distinguish
  (STANDARD_M_BOUNDS, read from the image's aiter), routed as the image's CK mode routes them (aiter's tuned
  dispatch for bf16 layers; the CK-free fallbacks for fp8 layers and experts).
- hooks: the three things Triton offers for this, in one place: a stand-in driver that answers the target
  question with no GPU, compile-only launches (JITFunction's warmup), and the compilation listener.
- replay: the calls made through aiter's own entry points (its configs, its grids), compile only.
- manifest: what a cache holds, read from its files (each kernel's code object and arch from its bytes), and
  the JSON the image keeps beside it.
The image side: standard library, torch and triton only; aiter through validation.aiterpkg.adapter.
"""
