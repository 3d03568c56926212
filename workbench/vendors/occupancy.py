"""Occupancy models: how many waves / warps a kernel's register use leaves resident.

Each model is a small rule set written from the public description of a vendor's
occupancy calculator or compiler (sources are named next to each rule), and returns
an `Occupancy`:

    nvidia_occupancy(registers_per_thread, threads_per_block, ...)   CUDA occupancy rules
    adreno_occupancy(full_regs_vec4, half_regs_vec4, local_size, gpu=740, ...)   Mesa ir3
    mali_occupancy(work_registers, ...)                              Arm Bifrost / Valhall
    amd_occupancy(vgprs, wave_size, family, ...)                     RADV radv_get_max_waves
    occupancy_for_device(device, registers, local_size, ...)         picks one of the above

Helpers:
    registers_from_statistics(stats)  VK_KHR_pipeline_executable_properties → common keys
    occupancy_table(model_fn, registers_range, **kw)  one DataFrame row per register count

Units of "registers" differ per vendor and are never converted silently:
NVIDIA / NVK: 32-bit registers per thread; Adreno: vec4 (4 × 32-bit) full registers per
fibre; Mali: 32-bit work registers per thread; AMD: 32-bit VGPRs per lane.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Occupancy",
    "NvidiaArch",
    "NVIDIA_ARCHS",
    "nvidia_occupancy",
    "guess_nvidia_arch",
    "AdrenoGpu",
    "ADRENO_GPUS",
    "adreno_register_footprint",
    "adreno_should_double_threadsize",
    "adreno_occupancy",
    "mali_occupancy",
    "AmdFamily",
    "AMD_FAMILIES",
    "amd_occupancy",
    "guess_amd_family",
    "occupancy_for_device",
    "known_models",
    "registers_from_statistics",
    "NVIDIA_NO_LOCAL_MEMORY_SENTINEL",
    "occupancy_table",
]


# --------------------------------------------------------------------------------------
# Result type
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Occupancy:
    """What a model says about one kernel configuration.

    `limiter` names the limit that binds; when several bind equally they are all listed,
    joined by ", " in the model's fixed order (see `limiters`). `details` holds every
    intermediate number of the rule so a notebook can show its working.
    """

    model: str
    waves_or_warps_active: int
    max_waves_or_warps: int
    occupancy: float
    limiter: str
    details: dict = field(default_factory=dict)

    @property
    def limiters(self) -> tuple[str, ...]:
        return tuple(self.limiter.split(", "))

    @property
    def percent(self) -> float:
        return 100.0 * self.occupancy


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def _binding_limits(limits: Mapping[str, float], result: float) -> str:
    """All limits equal to the result, in the dict's order (ties → all of them)."""
    return ", ".join(name for name, value in limits.items() if value == result)


def _thread_count(local_size: int | Iterable[int]) -> int:
    if isinstance(local_size, int):
        threads = local_size
    else:
        threads = math.prod(int(n) for n in local_size)
    if threads <= 0:
        raise ValueError(f"local size must hold at least one thread, got {local_size!r}")
    return threads


def _require_non_negative(**values: int) -> None:
    for name, value in values.items():
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")


# --------------------------------------------------------------------------------------
# NVIDIA — CUDA occupancy calculator rules
# Sources: occupancy.md B6 (the rules of cuda_occupancy.h, CUDA 12.9, restated there),
# CUDA C++ Programming Guide "Compute Capabilities" table (warps, blocks, shared memory
# per SM and per block) and its shared-memory carveout lists for cc 8.x / 9.0.
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NvidiaArch:
    name: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_carveouts_kib: tuple[int, ...]      # SM shared-memory sizes the driver can pick
    max_shared_per_block_optin: int            # bytes a block may request (opt-in maximum)
    has_barrier_limit: bool = False            # cc >= 9: named barriers limit blocks
    registers_per_sm: int = 65536
    registers_per_block: int = 65536
    register_allocation_unit: int = 256        # registers, allocated per warp
    sub_partitions: int = 4
    max_registers_per_thread: int = 255        # ptxas / Programming Guide limit
    max_threads_per_block: int = 1024
    reserved_shared_per_block: int = 1024      # cc >= 8: 1 KiB system use per block
    shared_allocation_unit: int = 128          # bytes
    warp_size: int = 32

    @property
    def max_shared_per_sm(self) -> int:
        return max(self.shared_carveouts_kib) * 1024


# Programming Guide table: warps/SM 64 (8.0, 9.0), 48 (8.6, 8.9); blocks/SM 32 (8.0),
# 16 (8.6), 24 (8.9), 32 (9.0); shared/SM 164 KB (8.0), 100 KB (8.6, 8.9), 228 KB (9.0);
# shared/block opt-in 163 KB, 99 KB, 99 KB, 227 KB. Carveouts: 8.0 → 0..164 KB,
# 8.6 / 8.9 → 0..100 KB, 9.0 → 0..228 KB (the list in occupancy.md B6).
NVIDIA_ARCHS: dict[str, NvidiaArch] = {
    "sm_80": NvidiaArch("sm_80", 64, 32, (0, 8, 16, 32, 64, 100, 132, 164), 163 * 1024),
    "sm_86": NvidiaArch("sm_86", 48, 16, (0, 8, 16, 32, 64, 100), 99 * 1024),
    "sm_89": NvidiaArch("sm_89", 48, 24, (0, 8, 16, 32, 64, 100), 99 * 1024),
    "sm_90": NvidiaArch("sm_90", 64, 32, (0, 8, 16, 32, 64, 100, 132, 164, 196, 228),
                        227 * 1024, has_barrier_limit=True),
}


def _nvidia_arch(arch: str | int | NvidiaArch) -> NvidiaArch:
    if isinstance(arch, NvidiaArch):
        return arch
    text = str(arch).strip().lower()
    match = re.fullmatch(r"(?:sm_?|compute_?)?(\d)\.?(\d)", text)
    key = f"sm_{match.group(1)}{match.group(2)}" if match else text
    if key not in NVIDIA_ARCHS:
        raise ValueError(f"unknown NVIDIA arch {arch!r}; known: {', '.join(NVIDIA_ARCHS)}")
    return NVIDIA_ARCHS[key]


def _nvidia_register_limit(a: NvidiaArch, registers_per_thread: int, warps_per_block: int) -> float:
    """Blocks per SM allowed by the register file (CUDA rule, B6)."""
    if registers_per_thread > a.max_registers_per_thread:
        return 0
    if registers_per_thread == 0:
        return math.inf
    registers_per_warp = _round_up(registers_per_thread * a.warp_size, a.register_allocation_unit)
    # The hardware checks a block as if its warps were spread over all sub-partitions.
    if registers_per_warp * _round_up(warps_per_block, a.sub_partitions) > a.registers_per_block:
        return 0
    warps_per_sub_partition = (a.registers_per_sm // a.sub_partitions) // registers_per_warp
    return (warps_per_sub_partition * a.sub_partitions) // warps_per_block


def _nvidia_sm_shared_bytes(a: NvidiaArch, shared_per_block: int, carveout_bytes: int | None) -> int:
    """SM shared memory: the preferred carveout (default: the largest), raised to the
    smallest supported carveout that holds one block."""
    wanted = a.max_shared_per_sm if carveout_bytes is None else max(carveout_bytes, shared_per_block)
    for size_kib in sorted(a.shared_carveouts_kib):
        if size_kib * 1024 >= wanted:
            return size_kib * 1024
    return a.max_shared_per_sm


def nvidia_occupancy(registers_per_thread: int, threads_per_block: int,
                     shared_bytes_per_block: int = 0, arch: str | int | NvidiaArch = "sm_90", *,
                     barriers_per_block: int = 0,
                     shared_carveout_bytes: int | None = None) -> Occupancy:
    """Resident warps per SM under the CUDA occupancy rules (occupancy.md B6).

    A Vulkan workgroup is a CUDA block; `registers_per_thread` is the driver's
    "Register Count" statistic; `shared_bytes_per_block` the workgroup's shared memory.
    """
    a = _nvidia_arch(arch)
    _require_non_negative(registers_per_thread=registers_per_thread,
                          shared_bytes_per_block=shared_bytes_per_block,
                          barriers_per_block=barriers_per_block)
    if threads_per_block <= 0:
        raise ValueError(f"threads_per_block must be > 0, got {threads_per_block}")

    warps_per_block = -(-threads_per_block // a.warp_size)
    block_fits = threads_per_block <= a.max_threads_per_block

    # warps: whole blocks of warps in the SM's warp slots
    warp_limit = a.max_warps_per_sm // warps_per_block if block_fits else 0
    register_limit = _nvidia_register_limit(a, registers_per_thread, warps_per_block)
    # shared memory: user bytes + 1 KiB reserved, rounded to 128 B, against the carveout
    shared_per_block = _round_up(shared_bytes_per_block + a.reserved_shared_per_block,
                                 a.shared_allocation_unit)
    if shared_bytes_per_block > a.max_shared_per_block_optin:
        sm_shared, shared_limit = a.max_shared_per_sm, 0
    else:
        sm_shared = _nvidia_sm_shared_bytes(a, shared_per_block, shared_carveout_bytes)
        shared_limit = sm_shared // shared_per_block

    limits: dict[str, float] = {
        "registers": register_limit,
        "shared memory": shared_limit,
        "warps": warp_limit,
        "blocks": a.max_blocks_per_sm,
    }
    if a.has_barrier_limit and barriers_per_block > 0:
        limits["barriers"] = (2 * a.max_blocks_per_sm) // barriers_per_block

    active_blocks = int(min(limits.values()))
    active_warps = active_blocks * warps_per_block
    details = {
        "arch": a.name,
        "warps_per_block": warps_per_block,
        "registers_per_warp": (_round_up(registers_per_thread * a.warp_size, a.register_allocation_unit)
                               if registers_per_thread else 0),
        "shared_bytes_per_block_allocated": shared_per_block,
        "sm_shared_bytes": sm_shared,
        "active_blocks": active_blocks,
        "block_limits": dict(limits),
    }
    if not block_fits:
        details["reason"] = f"{threads_per_block} threads exceed {a.max_threads_per_block} per block"
    return Occupancy(
        model=f"nvidia {a.name}",
        waves_or_warps_active=active_warps,
        max_waves_or_warps=a.max_warps_per_sm,
        occupancy=active_warps / a.max_warps_per_sm,
        limiter=_binding_limits(limits, active_blocks),
        details=details,
    )


# Name → arch guesses for NVIDIA Vulkan device names ("NVIDIA H200", "NVIDIA GeForce RTX
# 4090", NVK's "NVIDIA GeForce RTX 3080 (NVK GA102)"). Data-centre parts: H100/H200/H20/
# H800/GH200 Hopper; A100/A800/A30 GA100; A10/A10G/A40/A16/A2/RTX Axxxx GA10x; L4/L40/
# RTX xxxx Ada AD10x.
_NVIDIA_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\bG?H(100|200|20|800)\b|\bGH\d{3}\b", "sm_90"),
    (r"\bA(100|800|30)\b|\bGA100\b", "sm_80"),
    (r"RTX\s*40\d\d|\bL4\b|\bL40S?\b|\bAda\b|\bAD10\d\b", "sm_89"),
    (r"RTX\s*30\d\d|\bA10G?\b|\bA40\b|\bA16\b|\bA2\b|RTX\s*A\d{4}\b|\bGA10[2-7]\b", "sm_86"),
)


def _first_match(patterns, device_name: str) -> str | None:
    """The value of the first (pattern, value) whose pattern the name matches; None when none does."""
    return next((value for pattern, value in patterns if re.search(pattern, device_name, flags=re.IGNORECASE)), None)


def guess_nvidia_arch(device_name: str) -> str | None:
    """'NVIDIA H200' → 'sm_90'; None when the name gives no clue."""
    return _first_match(_NVIDIA_NAME_PATTERNS, device_name)


# --------------------------------------------------------------------------------------
# Qualcomm Adreno a6xx / a7xx — Mesa ir3 rules
# Sources: occupancy.md B7 (ir3.c ir3_get_reg_dependent_max_waves,
# ir3_get_reg_independent_max_waves, ir3_should_double_threadsize, ir3_collect_info);
# per-GPU numbers from Mesa src/freedreno/common/freedreno_devices.py (25.x).
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AdrenoGpu:
    gpu_id: int
    generation: str
    reg_size_vec4: int                     # vec4 registers per fibre slot of a wave pair
    shared_memory_bytes: int = 32 * 1024   # cs_shared_mem_size (ir3 local_mem_size)
    wave_granularity: int = 2              # "waves are always launched in pairs"
    supports_double_threadsize: bool = True
    threadsize_base: int = 64
    max_waves: int = 16
    branchstack_size: int = 64


def _adreno_family(ids: Iterable[int], generation: str, reg_size_vec4: int, **extra: Any) -> dict[int, AdrenoGpu]:
    return {i: AdrenoGpu(i, generation, reg_size_vec4, **extra) for i in ids}


# freedreno_devices.py: a6xx_gen1_low (a610/a612) 48 vec4, 16 KiB shared, single waves,
# no wave128; a6xx_gen1 and gen2 96; a6xx_gen3 (a650) and gen4 (a660, a690, a643/7c+
# Gen 3) 64; a7xx_base (a725, a730, a735, a740, a750) 96; Mesa 26.2's a8xx_gen1 (a810, a830) 96 and a8xx_gen2
# (a829, a840) 128 (the newer build of workbench.vendors.mesa_newer; tests/test_mesa_compilers.py checks them).
ADRENO_GPUS: dict[int, AdrenoGpu] = {
    **_adreno_family((610, 612), "a6xx gen1_low", 48, shared_memory_bytes=16 * 1024,
                     wave_granularity=1, supports_double_threadsize=False),
    **_adreno_family((615, 616, 618, 619, 620, 630), "a6xx gen1", 96),
    **_adreno_family((640, 680), "a6xx gen2", 96),
    **_adreno_family((650,), "a6xx gen3", 64),
    **_adreno_family((643, 660, 690), "a6xx gen4", 64),
    **_adreno_family((725, 730, 735, 740, 750), "a7xx", 96),
    **_adreno_family((810, 830), "a8xx gen1", 96),
    **_adreno_family((829, 840), "a8xx gen2", 128),
}

# ir3_ra.h RA_FULL_SIZE: the register allocator never goes past r47 (48 vec4); it
# spills instead (Turnip shows STP/LDP counts above that).
ADRENO_RA_MAX_FULL_VEC4 = 48


def _adreno_gpu(gpu: int | str | AdrenoGpu) -> AdrenoGpu:
    if isinstance(gpu, AdrenoGpu):
        return gpu
    match = re.search(r"(\d{3})", str(gpu))
    gpu_id = int(match.group(1)) if match else None
    if gpu_id not in ADRENO_GPUS:
        raise ValueError(f"unknown Adreno GPU {gpu!r}; known: {', '.join(map(str, ADRENO_GPUS))}")
    return ADRENO_GPUS[gpu_id]


def adreno_register_footprint(full_regs_vec4: int, half_regs_vec4: int = 0) -> int:
    """vec4 registers a fibre occupies: ir3 counts (max_reg + 1) + (max_half_reg + 2) / 2.

    The arguments are Turnip's "Registers used" (= max_reg + 1) and "Half-registers
    used" (= max_half_reg + 1, 0 when none); two half vec4 registers share one full one.
    """
    _require_non_negative(full_regs_vec4=full_regs_vec4, half_regs_vec4=half_regs_vec4)
    return full_regs_vec4 + (half_regs_vec4 + 1) // 2


def adreno_should_double_threadsize(regs_vec4: int, local_size: int | Iterable[int] = 64,
                                    gpu: int | str | AdrenoGpu = 740, branchstack: int = 0) -> bool:
    """ir3_should_double_threadsize for compute on a6xx+ (B7): wave128 unless the
    workgroup fits one wave64, doubling would overflow the register file, or the branch
    stack of a wave128 would exceed the hardware's."""
    g = _adreno_gpu(gpu)
    if not g.supports_double_threadsize:
        return False
    if min(branchstack, 2 * g.threadsize_base) > g.branchstack_size:
        return False
    if _thread_count(local_size) <= g.threadsize_base:
        return False
    return regs_vec4 * 2 <= g.reg_size_vec4


def adreno_occupancy(full_regs_vec4: int, half_regs_vec4: int = 0, local_size: int | Iterable[int] = 64,
                     gpu: int | str | AdrenoGpu = 740, shared_bytes: int = 0, branchstack: int = 0,
                     double_threadsize: bool | None = None) -> Occupancy:
    """Waves per SP core as Mesa's ir3 computes "Max Waves Per Core" (B7).

    `double_threadsize=None` lets ir3 decide (wave64 vs wave128); True / False stands for a
    required subgroup size of 128 / 64. Occupancy = waves / 16 wave slots.

    Checked against Turnip's measured "Max Waves Per Core" (B7): every point follows the
    formula once the threadsize decision is taken as ir3 takes it. At local size 128 the
    shader runs wave128 whenever 2·regs ≤ reg_size_vec4 — so 48 registers give 2 waves
    (wave64 would give 4) and 3 registers give 16 (32 capped by the wave slots).
    Registers 25–32 all give 6 waves at wave64; ir3's allocator grows its target to the
    largest count of the same wave level, so the seed's "28 registers" is usually
    reported as 32.
    """
    g = _adreno_gpu(gpu)
    _require_non_negative(shared_bytes=shared_bytes, branchstack=branchstack)
    threads = _thread_count(local_size)
    regs = adreno_register_footprint(full_regs_vec4, half_regs_vec4)
    if double_threadsize is None:
        double = adreno_should_double_threadsize(regs, threads, g, branchstack)
    else:
        double = bool(double_threadsize)
        if double and not g.supports_double_threadsize:
            raise ValueError(f"Adreno {g.gpu_id} has no wave128 (double threadsize)")
    threadsize_factor = 2 if double else 1
    threadsize = g.threadsize_base * threadsize_factor

    # reg-dependent: wave pairs that fit the register file, × the pair granularity
    register_limit = ((g.reg_size_vec4 // (regs * threadsize_factor)) * g.wave_granularity
                      if regs else g.max_waves)
    limits: dict[str, int] = {"registers": register_limit}
    # reg-independent: shared memory (1 KiB chunks), branch stack, wave slots
    if shared_bytes > 0:
        waves_per_workgroup = -(-threads // (threadsize * g.wave_granularity))
        workgroups_per_core = g.shared_memory_bytes // _round_up(shared_bytes, 1024)
        limits["shared memory"] = waves_per_workgroup * workgroups_per_core * g.wave_granularity
    if branchstack > 0:
        limits["branch stack"] = (g.branchstack_size // branchstack) * g.wave_granularity
    limits["wave slots"] = g.max_waves

    waves = min(limits.values())
    details = {
        "gpu": g.gpu_id,
        "generation": g.generation,
        "regs_vec4": regs,
        "reg_size_vec4": g.reg_size_vec4,
        "double_threadsize": double,
        "threadsize": threadsize,
        "resident_fibers": waves * threadsize,
        "wave_limits": dict(limits),
        "register_file_bytes": g.reg_size_vec4 * g.threadsize_base * g.wave_granularity * 16,
    }
    if full_regs_vec4 > ADRENO_RA_MAX_FULL_VEC4:
        details["note"] = (f"ir3 allocates at most {ADRENO_RA_MAX_FULL_VEC4} full vec4 registers; "
                           "a real shader would spill instead")
    return Occupancy(
        model=f"adreno a{g.gpu_id} (ir3)",
        waves_or_warps_active=waves,
        max_waves_or_warps=g.max_waves,
        occupancy=waves / g.max_waves,
        limiter=_binding_limits(limits, waves),
        details=details,
    )


# --------------------------------------------------------------------------------------
# Arm Mali Bifrost / Valhall
# Source: occupancy.md B8 — work registers are allocated as 32 or 64 per thread; using
# more than 32 halves the resident threads (Arm staff answer; Mesa panfrost
# va_print_stats: nr_threads = work_reg_count <= 32 ? 2 : 1).
# --------------------------------------------------------------------------------------

MALI_MAX_WORK_REGISTERS = 64


def mali_occupancy(work_registers: int, max_threads_per_core: int = 1024, warp_size: int = 16) -> Occupancy:
    """Full occupancy up to 32 work registers, half from 33 to 64.

    Thread capacity per core differs between Mali products; pass the one from Arm's
    product page (1024 is only a placeholder). Valhall warps are 16 wide.
    """
    _require_non_negative(work_registers=work_registers)
    if work_registers > MALI_MAX_WORK_REGISTERS:
        raise ValueError(f"Mali threads have at most {MALI_MAX_WORK_REGISTERS} work registers "
                         f"(got {work_registers}); the compiler spills to the stack beyond that")
    max_warps = max_threads_per_core // warp_size
    full = work_registers <= 32
    active = max_warps if full else max_warps // 2
    return Occupancy(
        model="mali (bifrost/valhall)",
        waves_or_warps_active=active,
        max_waves_or_warps=max_warps,
        occupancy=active / max_warps,
        limiter="wave slots" if full else "registers",
        details={"register_allocation": 32 if full else 64,
                 "threads_per_core": active * warp_size,
                 "warp_size": warp_size},
    )


# --------------------------------------------------------------------------------------
# AMD GCN / RDNA — RADV radv_get_max_waves
# Source: occupancy.md B8 (radv_shader.c radv_get_max_waves; ac_gpu_info.c constants).
# SGPR budget (GCN only): 800 per SIMD, allocated in 16s (GFX8/9; LLVM AMDGPU
# getTotalNumSGPRs / getSGPRAllocGranule). LDS limit: an approximation written here —
# whole workgroups per LDS pool (64 KiB per CU on GCN, 128 KiB per WGP on RDNA), their
# waves spread over the SIMDs that share the pool; LDS allocated in 512 B units.
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AmdFamily:
    name: str
    gfx: str
    max_waves_per_simd: int
    wave64_vgprs_per_simd: int
    wave_sizes: tuple[int, ...]
    npot_vgpr_granule: bool          # GFX10.3+: VGPR blocks sized by the register file
    sgprs_per_simd: int | None       # only pre-GFX10 SGPRs limit waves
    sgpr_granule: int
    lds_bytes_per_pool: int          # CU (GCN) or WGP (RDNA)
    simds_per_lds_pool: int
    lds_granule: int = 512
    max_vgprs_per_wave: int = 256


AMD_FAMILIES: dict[str, AmdFamily] = {
    "gcn": AmdFamily("gcn", "GFX8/9", 10, 256, (64,), False, 800, 16, 64 * 1024, 4),
    "polaris": AmdFamily("polaris", "GFX8 Polaris", 8, 256, (64,), False, 800, 16, 64 * 1024, 4),
    "rdna1": AmdFamily("rdna1", "GFX10", 20, 512, (32, 64), False, None, 16, 128 * 1024, 4),
    "rdna2": AmdFamily("rdna2", "GFX10.3", 16, 512, (32, 64), True, None, 16, 128 * 1024, 4),
    # Navi 31/32: 1536 wave32 VGPRs per SIMD (768 wave64); Navi 33 and the APUs: 1024.
    "rdna3": AmdFamily("rdna3", "GFX11 Navi31/32", 16, 768, (32, 64), True, None, 16, 128 * 1024, 4),
    "rdna3_navi33": AmdFamily("rdna3_navi33", "GFX11 Navi33/APU", 16, 512, (32, 64), True, None, 16,
                              128 * 1024, 4),
}


def _amd_vgpr_block(f: AmdFamily, vgprs: int, wave_size: int) -> int:
    """VGPRs a wave really holds: granule 8 (wave32) / 4 (wave64); on GFX10.3+ further
    rounded to the register file's block (file/64 × 2 for wave32)."""
    allocated = _round_up(vgprs, 8 if wave_size == 32 else 4)
    if f.npot_vgpr_granule:
        allocated = _round_up(allocated, (f.wave64_vgprs_per_simd // 64) * (2 if wave_size == 32 else 1))
    return allocated


def amd_occupancy(vgprs: int, wave_size: int = 32, family: str | AmdFamily = "rdna2", *,
                  sgprs: int = 0, lds_bytes_per_workgroup: int = 0,
                  local_size: int | Iterable[int] = 64) -> Occupancy:
    """Waves per SIMD (RADV's "Subgroups per SIMD")."""
    f = family if isinstance(family, AmdFamily) else AMD_FAMILIES.get(str(family).lower())
    if f is None:
        raise ValueError(f"unknown AMD family {family!r}; known: {', '.join(AMD_FAMILIES)}")
    if wave_size not in f.wave_sizes:
        raise ValueError(f"{f.name} runs wave sizes {f.wave_sizes}, not {wave_size}")
    _require_non_negative(vgprs=vgprs, sgprs=sgprs, lds_bytes_per_workgroup=lds_bytes_per_workgroup)

    physical_vgprs = f.wave64_vgprs_per_simd * (64 // wave_size)
    allocated_vgprs = _amd_vgpr_block(f, vgprs, wave_size) if vgprs else 0
    if vgprs > f.max_vgprs_per_wave:
        vgpr_limit = 0
    else:
        vgpr_limit = physical_vgprs // allocated_vgprs if allocated_vgprs else f.max_waves_per_simd
    limits: dict[str, int] = {"registers": vgpr_limit}
    if f.sgprs_per_simd is not None and sgprs > 0:
        limits["scalar registers"] = f.sgprs_per_simd // _round_up(sgprs, f.sgpr_granule)
    if lds_bytes_per_workgroup > 0:
        waves_per_workgroup = -(-_thread_count(local_size) // wave_size)
        workgroups = f.lds_bytes_per_pool // _round_up(lds_bytes_per_workgroup, f.lds_granule)
        limits["shared memory"] = (workgroups * waves_per_workgroup) // f.simds_per_lds_pool
    limits["wave slots"] = f.max_waves_per_simd

    waves = min(limits.values())
    # RADV counts a wave64 as two wave32 on GFX10+ (radv_get_max_waves ends `gfx_level >= GFX10 ? max_simd_waves *
    # (wave_size / 32)`, radv_shader.c in Mesa 25.0.7): its "Subgroups per SIMD" for a wave64 shader is twice the
    # slots above, of 2 x max_waves_per_simd. RADV compiles compute as wave64 on RDNA unless RADV_PERFTEST=cswave32,
    # so without this the model was off by 2x for every RADV compute shader (data/llvmpipe/mesa_compilers.md).
    per_slot = wave_size // 32 if 32 in f.wave_sizes else 1
    return Occupancy(
        model=f"amd {f.name} wave{wave_size}",
        waves_or_warps_active=waves * per_slot,
        max_waves_or_warps=f.max_waves_per_simd * per_slot,
        occupancy=waves / f.max_waves_per_simd,
        limiter=_binding_limits(limits, waves),
        details={"family": f.name, "gfx": f.gfx, "wave_size": wave_size,
                 "physical_vgprs": physical_vgprs, "allocated_vgprs": allocated_vgprs,
                 "wave_limits": dict(limits), "radv_waves_per_slot": per_slot},
    )


# RADV names carry the chip: "AMD Radeon RX 6800 XT (RADV NAVI21)"; proprietary drivers
# give the marketing name only.
_AMD_NAME_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"NAVI3[12]\b|GFX110[01]|RX\s*7[789]\d\d", "rdna3"),
    (r"NAVI33\b|GFX110[23]|PHOENIX|RX\s*76\d\d", "rdna3_navi33"),
    (r"NAVI2\d\b|GFX103\d|VANGOGH|REMBRANDT|RAPHAEL|MENDOCINO|RX\s*6\d\d\d", "rdna2"),
    (r"NAVI1\d\b|GFX101\d|RX\s*5\d\d\d", "rdna1"),
    (r"POLARIS|VEGAM|RX\s*[45]\d0\b", "polaris"),
    (r"VEGA|RAVEN|RENOIR|CEZANNE|GFX90\w|TONGA|FIJI", "gcn"),
)


def guess_amd_family(device_name: str) -> str | None:
    return _first_match(_AMD_NAME_PATTERNS, device_name)


# --------------------------------------------------------------------------------------
# Device → model
# --------------------------------------------------------------------------------------

VENDOR_NVIDIA, VENDOR_QUALCOMM, VENDOR_ARM, VENDOR_AMD = 0x10DE, 0x5143, 0x13B5, 0x1002
VENDOR_INTEL, VENDOR_MESA, VENDOR_GOOGLE = 0x8086, 0x10005, 0x1AE0   # Mesa: lavapipe; Google: SwiftShader

_VENDOR_NAMES = {VENDOR_NVIDIA: "nvidia", VENDOR_QUALCOMM: "qualcomm", VENDOR_ARM: "arm",
                 VENDOR_AMD: "amd", VENDOR_INTEL: "intel"}
_CPU_DEVICE_WORDS = ("llvmpipe", "lavapipe", "swiftshader", "softpipe")


def known_models() -> str:
    return ("nvidia (" + ", ".join(NVIDIA_ARCHS) + "), "
            "adreno (" + ", ".join(f"a{i}" for i in ADRENO_GPUS) + "), "
            "mali (bifrost/valhall), "
            "amd (" + ", ".join(AMD_FAMILIES) + ")")


def _field(info: Any, *names: str) -> Any:
    for name in names:
        if isinstance(info, Mapping) and info.get(name) is not None:
            return info[name]
        if not isinstance(info, Mapping) and getattr(info, name, None) is not None:
            return getattr(info, name)
    return None


def _vendor_from_name(name: str) -> str | None:
    lowered = name.lower()
    if any(word in lowered for word in _CPU_DEVICE_WORDS):
        return "cpu"
    for words, vendor in ((("nvidia", "geforce", "quadro", "tesla"), "nvidia"),
                          (("adreno", "turnip", "freedreno"), "qualcomm"),
                          (("mali", "panvk", "panfrost"), "arm"),
                          (("radeon", "radv", "amd"), "amd"),
                          (("intel",), "intel")):
        if any(word in lowered for word in words):
            return vendor
    return None


def _describe_device(device: Any) -> tuple[str, str | None, Any]:
    """(name, vendor key, device type) from a name, a dict or a DeviceInfo-like object."""
    if isinstance(device, str):
        name, vendor_id, device_type = device, None, None
    else:
        name = str(_field(device, "name", "device_name", "deviceName") or "")
        vendor_id = _field(device, "vendor_id", "vendorID", "vendorId")
        device_type = _field(device, "device_type", "deviceType", "type")
    if isinstance(vendor_id, str):
        vendor_id = int(vendor_id, 0)           # "0x10DE" or "4318"
    is_cpu_type = device_type == 4 or "cpu" in str(device_type).lower()   # VK_PHYSICAL_DEVICE_TYPE_CPU = 4
    if is_cpu_type or vendor_id in (VENDOR_MESA, VENDOR_GOOGLE):
        return name, "cpu", device_type
    vendor = _VENDOR_NAMES.get(vendor_id) if vendor_id is not None else None
    if vendor_id is not None and vendor is None:
        vendor = f"vendor 0x{vendor_id:04X}"
    return name, vendor or _vendor_from_name(name), device_type


def _registers_in_unit(registers: int | Mapping, unit: str, device_name: str) -> tuple[int, int]:
    """(registers, half registers) from a count or a registers_from_statistics() dict."""
    if not isinstance(registers, Mapping):
        return int(registers), 0
    normalised = registers if "register_unit" in registers else registers_from_statistics(registers)
    if normalised.get("registers") is None:
        raise ValueError(f"no register count in the statistics for {device_name}")
    if normalised["register_unit"] != unit:
        raise ValueError(f"{device_name} needs registers in unit {unit!r}, "
                         f"the statistics give {normalised['register_unit']!r}")
    return int(normalised["registers"]), int(normalised.get("half_registers") or 0)


def occupancy_for_device(device: Any, registers: int | Mapping, local_size: int | Iterable[int] = 64, *,
                         shared_bytes: int = 0, half_registers: int = 0, subgroup_size: int | None = None,
                         arch: str | None = None, gpu: int | str | None = None, family: str | None = None,
                         **model_kwargs: Any) -> Occupancy:
    """Pick the model for a device and run it.

    `device`: a name ("NVIDIA H200", "Turnip Adreno (TM) 740"), a dict or an object with
    name / vendor_id (e.g. `vk.DeviceInfo`). `registers`: a count in the vendor's unit
    (see the module docstring) or the dict of `registers_from_statistics` / raw driver
    statistics. `arch` / `gpu` / `family` override what the name suggests;
    `subgroup_size` selects the AMD wave size (default wave32 on RDNA, wave64 on GCN) or
    forces the Adreno threadsize (64 / 128). Raises ValueError naming the device and the
    known models when none fits.
    """
    name, vendor, device_type = _describe_device(device)
    label = name or repr(device)
    threads = _thread_count(local_size)

    if vendor == "cpu":
        raise ValueError(f"no occupancy model for CPU device {label}: registers are not a limit there")
    if vendor == "nvidia":
        chosen_arch = arch or guess_nvidia_arch(name)
        if chosen_arch is None:
            raise ValueError(f"cannot tell the NVIDIA architecture of {label}; pass arch= one of "
                             f"{', '.join(NVIDIA_ARCHS)}")
        regs, _ = _registers_in_unit(registers, "scalar32", label)
        return nvidia_occupancy(regs, threads, shared_bytes, chosen_arch, **model_kwargs)
    if vendor == "qualcomm":
        regs, stats_half = _registers_in_unit(registers, "vec4", label)
        double = None if subgroup_size is None else subgroup_size > 64
        return adreno_occupancy(regs, half_registers or stats_half, threads, gpu if gpu is not None else name,
                                shared_bytes=shared_bytes, double_threadsize=double, **model_kwargs)
    if vendor == "arm":
        regs, _ = _registers_in_unit(registers, "work", label)
        return mali_occupancy(regs, **model_kwargs)
    if vendor == "amd":
        chosen_family = family or guess_amd_family(name)
        if chosen_family is None:
            raise ValueError(f"cannot tell the AMD family of {label}; pass family= one of "
                             f"{', '.join(AMD_FAMILIES)}")
        wave_size = subgroup_size or (64 if chosen_family in ("gcn", "polaris") else 32)
        regs, _ = _registers_in_unit(registers, "vgpr", label)
        return amd_occupancy(regs, wave_size, chosen_family, lds_bytes_per_workgroup=shared_bytes,
                             local_size=threads, **model_kwargs)
    raise ValueError(f"no occupancy model for device {label} ({vendor or 'unknown vendor'}); "
                     f"known models: {known_models()}")


# --------------------------------------------------------------------------------------
# Driver statistics (VK_KHR_pipeline_executable_properties) → common keys
# Source: occupancy.md B9 (statistic names from Mesa 25.0.7 and the NVIDIA driver).
# --------------------------------------------------------------------------------------

# NVIDIA's "Local Memory Size" carries a 2**36 offset: 2**36 exactly for shaders that use no local memory (B9,
# H200), 2**36 + bytes for shaders that spill (seen on the H200: 68719476848 = 2**36 + 112 at 255 registers).
NVIDIA_NO_LOCAL_MEMORY_SENTINEL = 68719476736   # 2**36

_DRIVER_SIGNATURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nvidia", ("Register Count",)),
    ("turnip", ("Registers used",)),
    ("turnip", ("Max Waves Per Core",)),
    ("radv", ("Subgroups per SIMD",)),
    ("amdvlk", ("numUsedVgprs",)),
    ("amd", ("VGPRs",)),
    ("anv", ("Max live registers",)),
    ("anv", ("Max dispatch width",)),
    ("nvk", ("Number of GPRs", "SLM Size")),
    ("gpr", ("Number of GPRs",)),          # NVK without SLM Size, or Honeykrisp
    ("v3dv", ("QPU Read Stalls",)),
    ("malioc", ("Work registers",)),       # Arm Mali Offline Compiler report (B8)
)

# common key → candidate statistic names (first present wins)
_COMMON_NAMES: dict[str, tuple[str, ...]] = {
    "instructions": ("Instruction Count", "Instructions", "Instruction count"),
    "code_bytes": ("Binary Size", "Code size", "Code Size"),
    "shared_bytes": ("Shared Memory Size", "LDS size", "Workgroup Memory Size"),
    "stack_bytes": ("Stack Size",),
}

_REGISTER_SOURCES: dict[str, tuple[str, str]] = {
    # driver → (statistic, unit)
    "nvidia": ("Register Count", "scalar32"),      # 32-bit registers per thread
    "turnip": ("Registers used", "vec4"),          # max_reg + 1, full vec4 registers
    "radv": ("VGPRs", "vgpr"),
    "amd": ("VGPRs", "vgpr"),
    "amdvlk": ("numUsedVgprs", "vgpr"),
    "anv": ("Max live registers", "grf"),          # ANV's live-register count (GRF units)
    "nvk": ("Number of GPRs", "scalar32"),         # NVK: 32-bit GPRs per thread
    "gpr": ("Number of GPRs", "gpr"),              # unit depends on the driver
    "malioc": ("Work registers", "work"),          # Mali 32-bit work registers per thread
}


def _plain_value(value: Any) -> Any:
    """Unwrap {'value': x} / objects with .value; keep numbers, bools and strings."""
    if isinstance(value, Mapping) and "value" in value:
        return value["value"]
    if hasattr(value, "value") and not isinstance(value, (int, float, str, bool)):
        return value.value
    return value


def _first(stats: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        if name in stats:
            return stats[name]
    return None


def _detect_driver(stats: Mapping[str, Any]) -> str:
    for driver, needed in _DRIVER_SIGNATURES:
        if all(name in stats for name in needed):
            return driver
    return "unknown"


def _spill_figures(driver: str, stats: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(spills, scratch bytes) where the driver says; None where it does not."""
    if driver == "nvidia":
        local = stats.get("Local Memory Size")
        if local is None:
            return None, None
        local = int(local)
        return None, local - NVIDIA_NO_LOCAL_MEMORY_SENTINEL if local >= NVIDIA_NO_LOCAL_MEMORY_SENTINEL else local
    if driver in ("radv", "amd"):
        spilled = [stats[k] for k in ("Spilled VGPRs", "Spilled SGPRs") if k in stats]
        return (sum(spilled) if spilled else None), stats.get("Scratch size")
    if driver == "turnip":
        # STP = stores to private memory: register spills, or a private array.
        return stats.get("STP Count"), None
    if driver == "anv":
        return stats.get("Spill Count"), stats.get("Scratch Memory Size")
    if driver == "nvk":
        return None, stats.get("SLM Size")
    if driver == "v3dv":
        return stats.get("TMU Spills"), stats.get("Spill Size")
    return None, None


def registers_from_statistics(stats: Mapping[str, Any], driver: str | None = None) -> dict:
    """Normalise one executable's statistics across drivers.

    Returns: driver, registers, register_unit ('scalar32' | 'vec4' | 'vgpr' | 'grf' |
    'gpr' | 'work' | None), half_registers (Turnip), scalar_registers (AMD SGPRs),
    driver_max_waves (Turnip "Max Waves Per Core", RADV "Subgroups per SIMD", v3dv
    "Thread Count"), spills, scratch_bytes (NVIDIA's no-local-memory sentinel → 0),
    shared_bytes, stack_bytes, code_bytes, instructions, and raw (the input, unwrapped).
    """
    raw = {str(k): _plain_value(v) for k, v in stats.items()}
    if raw and all(isinstance(v, Mapping) for v in raw.values()):
        raise ValueError("pass one executable's statistics, not a dict of executables: "
                         f"{', '.join(raw)}")
    driver = (driver or _detect_driver(raw)).lower()

    register_name, unit = _REGISTER_SOURCES.get(driver, (None, None))
    registers = raw.get(register_name) if register_name else None
    spills, scratch_bytes = _spill_figures(driver, raw)
    result = {
        "driver": driver,
        "registers": registers,
        "register_unit": unit if registers is not None else None,
        "half_registers": raw.get("Half-registers used"),
        "scalar_registers": _first(raw, "SGPRs", "numUsedSgprs"),
        "driver_max_waves": _first(raw, "Max Waves Per Core", "Subgroups per SIMD", "Thread Count"),
        "spills": spills,
        "scratch_bytes": scratch_bytes,
    }
    for key, names in _COMMON_NAMES.items():
        result[key] = _first(raw, *names)
    result["raw"] = raw
    return result


# --------------------------------------------------------------------------------------
# pandas helper
# --------------------------------------------------------------------------------------

def occupancy_table(model_fn: Callable[..., Occupancy], registers_range: Iterable[int], **kw: Any):
    """One row per register count: registers, occupancy, limiter, active, max, model.

    `model_fn(registers, **kw)` is any model above, e.g.
    `occupancy_table(nvidia_occupancy, range(16, 256, 8), threads_per_block=64)`.
    """
    import pandas as pd

    rows = []
    for registers in registers_range:
        result = model_fn(registers, **kw)
        rows.append({
            "registers": registers,
            "occupancy": result.occupancy,
            "limiter": result.limiter,
            "active": result.waves_or_warps_active,
            "max": result.max_waves_or_warps,
            "model": result.model,
        })
    return pd.DataFrame(rows, columns=["registers", "occupancy", "limiter", "active", "max", "model"])
