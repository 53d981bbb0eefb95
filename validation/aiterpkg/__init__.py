"""What aiter looks like, in one place: where it is (locate), its Triton kernels loaded from source without ROCm
(adapter) and run (triton_ops), its tuned-GEMM lookup executed (tuned_lookup) and its GEMM dispatcher traced
(gemm_dispatch), its tuned CSVs (tuned_csv) and its Triton configs' LDS need (config_lds).

Named aiterpkg, never aiter: `import aiter` must always mean the real package (or adapter's stand-in)."""
