"""Probe outputs written by hand from the documented formats of rocminfo, amd-smi static and KFD sysfs."""

ROCMINFO_HEAD = """ROCk module version 6.10.5 is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.15
System Timestamp Freq.:  1000.000000MHz
Machine Model:           LARGE
System Endianness:       LITTLE

==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Uuid:                    CPU-XX
  Marketing Name:          AMD EPYC 9654 96-Core Processor
  Vendor Name:             CPU
  Feature:                 None specified
  Device Type:             CPU
  Compute Unit:            192
  ISA Info:
"""


def rocminfo_gpu(index: int, gfx: str, cus: int, market: str = "AMD Instinct MI300X") -> str:
    return f"""*******
Agent {index}
*******
  Name:                    {gfx}
  Uuid:                    GPU-{index:016x}
  Marketing Name:          {market}
  Vendor Name:             AMD
  Feature:                 KERNEL_DISPATCH
  Device Type:             GPU
  Compute Unit:            {cus}
  SIMDs per CU:            4
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--{gfx}:sramecc+:xnack-
      Machine Models:          HSA_MACHINE_MODEL_LARGE
"""


def rocminfo(gpus: list[tuple[str, int]]) -> str:
    return ROCMINFO_HEAD + "".join(rocminfo_gpu(i + 2, g, c) for i, (g, c) in enumerate(gpus)) + "*** Done ***\n"


def amd_smi_text(gpus: list[tuple[str, int]]) -> str:
    out = []
    for i, (gfx, cus) in enumerate(gpus):
        out.append(f"""GPU: {i}
    ASIC:
        MARKET_NAME: AMD Instinct MI355X
        VENDOR_ID: 0x1002
        DEVICE_ID: 0x75a3
        REV_ID: 0x00
        ASIC_SERIAL: 0x1234
        OAM_ID: {i}
        NUM_COMPUTE_UNITS: {cus}
        TARGET_GRAPHICS_VERSION: {gfx}
    BUS:
        BDF: 0000:{i:02x}:00.0
""")
    return "\n".join(out)


def amd_smi_json(gpus: list[tuple[str, int]]) -> str:
    import json

    return json.dumps({"gpu_data": [
        {"gpu": i, "asic": {"market_name": "AMD Instinct MI300X", "num_compute_units": cus,
                            "target_graphics_version": gfx}} for i, (gfx, cus) in enumerate(gpus)]})


def kfd_cpu() -> str:
    return "cpu_cores_count 96\nsimd_count 0\nmem_banks_count 1\ngfx_target_version 0\n"


def kfd_gpu(version: int, simds: int = 1216) -> str:
    return (f"cpu_cores_count 0\nsimd_count {simds}\nmem_banks_count 1\ngfx_target_version {version}\n"
            "simd_per_cu 4\nmax_waves_per_simd 8\n")
