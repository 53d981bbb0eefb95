"""The GPU host: which architectures it has (arch), which device nodes and driver its containers get (gpu)."""
