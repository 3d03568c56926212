"""Tests for workbench.vendors.occupancy: worked examples from the references, properties, adapters."""

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.vendors.occupancy import (ADRENO_GPUS, AMD_FAMILIES, NVIDIA_ARCHS, NVIDIA_NO_LOCAL_MEMORY_SENTINEL, Occupancy, adreno_occupancy, adreno_register_footprint, adreno_should_double_threadsize, amd_occupancy, guess_amd_family, guess_nvidia_arch, mali_occupancy, nvidia_occupancy, occupancy_for_device, occupancy_table, registers_from_statistics)

FAST = settings(max_examples=150, deadline=None)


# ---------------------------------------------------------------- NVIDIA (occupancy.md B6)

@pytest.mark.parametrize("registers, expected_occupancy, expected_warps", [
    (128, 0.25, 16),     # 4096 regs/warp → 4 warps/sub-partition → 16 warps → 2 blocks
    (40, 0.75, 48),      # 1280 → 12 per sub-partition → 48 warps → 6 blocks
    (255, 0.125, 8),     # 8192 → 2 → 8 warps → 1 block
    (32, 1.0, 64),
    (16, 1.0, 64),
    (1, 1.0, 64),
])
def test_nvidia_worked_examples_sm90_256_threads(registers, expected_occupancy, expected_warps):
    result = nvidia_occupancy(registers, 256, arch="sm_90")
    assert result.occupancy == pytest.approx(expected_occupancy)
    assert result.waves_or_warps_active == expected_warps
    assert result.max_waves_or_warps == 64


def test_nvidia_worked_example_details():
    result = nvidia_occupancy(128, 256)
    assert result.details["registers_per_warp"] == 4096
    assert result.details["active_blocks"] == 2
    assert result.limiter == "registers"


def test_nvidia_ties_list_every_binding_limit():
    # ≤ 32 registers with 256 threads: registers allow 8 blocks, warp slots 8 blocks
    result = nvidia_occupancy(32, 256)
    assert result.limiters == ("registers", "warps")
    assert nvidia_occupancy(24, 256).limiters == ("warps",)    # 768 regs/warp → 21 warps/sub


def test_nvidia_block_limit_binds_for_small_blocks():
    result = nvidia_occupancy(16, 32, arch="sm_90")            # 1 warp per block, 32 blocks max
    assert result.limiter == "blocks"
    assert result.waves_or_warps_active == 32
    assert result.occupancy == pytest.approx(0.5)
    assert nvidia_occupancy(16, 32, arch="sm_86").waves_or_warps_active == 16   # 16 blocks/SM


def test_nvidia_shared_memory_limit():
    # 48 KiB + 1 KiB reserved = 49 KiB per block; 228 KiB / 49 KiB = 4 blocks
    result = nvidia_occupancy(32, 128, shared_bytes_per_block=48 * 1024, arch="sm_90")
    assert result.details["shared_bytes_per_block_allocated"] == 49 * 1024
    assert result.details["active_blocks"] == 4
    assert result.limiter == "shared memory"
    # sm_86 carveout 100 KiB → 2 blocks
    assert nvidia_occupancy(32, 128, 48 * 1024, "sm_86").details["active_blocks"] == 2
    # above the opt-in maximum nothing launches
    over = nvidia_occupancy(32, 128, 228 * 1024, "sm_90")
    assert over.waves_or_warps_active == 0 and "shared memory" in over.limiters


def test_nvidia_shared_memory_granularity_128_bytes():
    result = nvidia_occupancy(32, 64, shared_bytes_per_block=1, arch="sm_90")
    assert result.details["shared_bytes_per_block_allocated"] == 1024 + 128


def test_nvidia_carveout_preference_rounds_up_to_a_supported_size():
    result = nvidia_occupancy(32, 64, 10_000, "sm_90", shared_carveout_bytes=20 * 1024)
    assert result.details["sm_shared_bytes"] == 32 * 1024          # next carveout ≥ 20 KiB
    assert result.details["active_blocks"] == (32 * 1024) // _round128(10_000 + 1024)


def _round128(n):
    return -(-n // 128) * 128


def test_nvidia_per_arch_constants():
    assert {a: NVIDIA_ARCHS[a].max_warps_per_sm for a in NVIDIA_ARCHS} == \
        {"sm_80": 64, "sm_86": 48, "sm_89": 48, "sm_90": 64}
    assert {a: NVIDIA_ARCHS[a].max_blocks_per_sm for a in NVIDIA_ARCHS} == \
        {"sm_80": 32, "sm_86": 16, "sm_89": 24, "sm_90": 32}
    assert max(NVIDIA_ARCHS["sm_80"].shared_carveouts_kib) == 164
    assert max(NVIDIA_ARCHS["sm_86"].shared_carveouts_kib) == 100
    assert max(NVIDIA_ARCHS["sm_90"].shared_carveouts_kib) == 228


def test_nvidia_sm86_has_48_warp_slots():
    result = nvidia_occupancy(32, 256, arch="sm_86")
    assert result.waves_or_warps_active == 48 and result.occupancy == 1.0
    assert result.limiters == ("warps",)                   # registers would allow 64


def test_nvidia_impossible_configurations():
    assert nvidia_occupancy(256, 64).waves_or_warps_active == 0         # > 255 registers
    too_big = nvidia_occupancy(32, 1025)
    assert too_big.waves_or_warps_active == 0 and "warps" in too_big.limiters
    # 255 regs × 1024 threads exceeds the 64 K register file per block
    assert nvidia_occupancy(255, 1024).waves_or_warps_active == 0


def test_nvidia_barrier_limit_only_on_sm90():
    assert nvidia_occupancy(16, 32, arch="sm_90", barriers_per_block=4).details["block_limits"]["barriers"] == 16
    assert nvidia_occupancy(16, 32, arch="sm_90", barriers_per_block=4).limiter == "barriers"
    assert "barriers" not in nvidia_occupancy(16, 32, arch="sm_80", barriers_per_block=4).details["block_limits"]


@pytest.mark.parametrize("registers, warps", [(43, 40), (68, 28), (157, 12)])
def test_nvidia_h200_measured_conv_tiles_local_64(registers, warps):
    # B12: TILE_N4 = 1 / 2 / 4 → 43 / 68 / 157 registers at local size 64 (derived occupancy)
    assert nvidia_occupancy(registers, 64, arch="sm_90").waves_or_warps_active == warps


def test_nvidia_arch_spellings():
    assert nvidia_occupancy(40, 256, arch="9.0").occupancy == nvidia_occupancy(40, 256, arch=90).occupancy
    with pytest.raises(ValueError, match="sm_90"):
        nvidia_occupancy(40, 256, arch="sm_70")


@FAST
@given(st.integers(0, 254), st.integers(1, 1024), st.integers(0, 100 * 1024),
       st.sampled_from(sorted(NVIDIA_ARCHS)))
def test_nvidia_more_registers_never_raise_occupancy(registers, threads, shared, arch):
    lower = nvidia_occupancy(registers, threads, shared, arch)
    higher = nvidia_occupancy(registers + 1, threads, shared, arch)
    assert higher.occupancy <= lower.occupancy


@FAST
@given(st.integers(0, 255), st.integers(1, 1024), st.integers(0, 100 * 1024),
       st.sampled_from(sorted(NVIDIA_ARCHS)))
def test_nvidia_limiter_is_the_minimum(registers, threads, shared, arch):
    result = nvidia_occupancy(registers, threads, shared, arch)
    limits = result.details["block_limits"]
    assert 0.0 <= result.occupancy <= 1.0
    assert result.details["active_blocks"] == min(limits.values())
    for name in result.limiters:
        assert limits[name] == result.details["active_blocks"]
    for name, value in limits.items():
        assert (name in result.limiters) == (value == result.details["active_blocks"])


# ---------------------------------------------------------------- Adreno (occupancy.md B7)

def test_adreno_etvk_seed_28_vec4_wave64_a740():
    result = adreno_occupancy(28, local_size=64, gpu=740)
    assert result.waves_or_warps_active == 6
    assert result.max_waves_or_warps == 16
    assert result.occupancy == pytest.approx(0.375)
    assert result.limiter == "registers"
    assert result.details["double_threadsize"] is False


@pytest.mark.parametrize("registers", range(25, 33))
def test_adreno_25_to_32_vec4_share_the_6_wave_level(registers):
    assert adreno_occupancy(registers, local_size=64).waves_or_warps_active == 6


@pytest.mark.parametrize("registers, waves", [(12, 16), (16, 12), (19, 10), (24, 8), (32, 6), (48, 4)])
def test_adreno_turnip_measured_local_64(registers, waves):
    result = adreno_occupancy(registers, local_size=64, gpu=740)
    assert result.waves_or_warps_active == waves
    assert result.details["threadsize"] == 64


@pytest.mark.parametrize("registers, waves", [(3, 16), (12, 8), (24, 4), (36, 2), (41, 2), (46, 2), (48, 2)])
def test_adreno_turnip_measured_local_128_wave128(registers, waves):
    result = adreno_occupancy(registers, local_size=128, gpu=740)
    assert result.waves_or_warps_active == waves
    assert result.details["double_threadsize"] is True       # Turnip reported subgroupSize 128
    assert result.details["threadsize"] == 128


def test_adreno_48_regs_at_local_128_stays_wave128():
    # 48·2 = 96 ≤ reg_size_vec4, so ir3 still doubles; wave64 would have given 4 waves.
    assert adreno_should_double_threadsize(48, 128, 740) is True
    assert adreno_occupancy(48, local_size=128, double_threadsize=False).waves_or_warps_active == 4
    assert adreno_should_double_threadsize(49, 128, 740) is False


def test_adreno_should_double_threadsize_rules():
    assert adreno_should_double_threadsize(8, 64) is False            # fits one wave64
    assert adreno_should_double_threadsize(8, (8, 8, 2)) is True
    assert adreno_should_double_threadsize(8, 128, branchstack=65) is False
    assert adreno_should_double_threadsize(8, 128, gpu=610) is False  # gen1_low: no wave128
    assert adreno_should_double_threadsize(33, 128, gpu=660) is False  # 66 > 64


def test_adreno_a660_cross_check():
    assert adreno_occupancy(32, local_size=64, gpu=660).waves_or_warps_active == 4
    for gpu in (730, 750):
        assert adreno_occupancy(32, local_size=64, gpu=gpu).waves_or_warps_active == 6


def test_adreno_table():
    assert ADRENO_GPUS[740].reg_size_vec4 == 96
    assert ADRENO_GPUS[730].reg_size_vec4 == ADRENO_GPUS[750].reg_size_vec4 == 96
    assert ADRENO_GPUS[660].reg_size_vec4 == 64
    assert ADRENO_GPUS[630].reg_size_vec4 == 96
    assert ADRENO_GPUS[610].supports_double_threadsize is False and ADRENO_GPUS[610].reg_size_vec4 == 48


def test_adreno_half_registers_count_half():
    assert adreno_register_footprint(10, 0) == 10
    assert adreno_register_footprint(10, 1) == 11
    assert adreno_register_footprint(10, 2) == 11
    assert adreno_register_footprint(10, 3) == 12
    assert adreno_occupancy(28, half_regs_vec4=10).details["regs_vec4"] == 33


def test_adreno_register_independent_limits():
    shared = adreno_occupancy(4, local_size=128, shared_bytes=16 * 1024)
    # wave128: 1 wave pair per workgroup; 32 KiB / 16 KiB = 2 workgroups; × 2 → 4 waves
    assert shared.waves_or_warps_active == 4 and shared.limiter == "shared memory"
    stack = adreno_occupancy(4, local_size=64, branchstack=16)
    assert stack.waves_or_warps_active == 8 and stack.limiter == "branch stack"
    assert adreno_occupancy(4, local_size=64).limiter == "wave slots"
    # ties list every binding limit
    assert adreno_occupancy(12, local_size=64).limiters == ("registers", "wave slots")


def test_adreno_unknown_gpu():
    with pytest.raises(ValueError, match="740"):
        adreno_occupancy(10, gpu=999)


@FAST
@given(st.integers(0, 60), st.integers(0, 8), st.integers(1, 1024), st.sampled_from(sorted(ADRENO_GPUS)),
       st.sampled_from([0, 1024, 4096, 16 * 1024]), st.sampled_from([0, 1, 8, 40, 80]))
def test_adreno_more_registers_never_raise_occupancy(full, half, threads, gpu, shared, branchstack):
    lower = adreno_occupancy(full, half, threads, gpu, shared, branchstack)
    more_full = adreno_occupancy(full + 1, half, threads, gpu, shared, branchstack)
    more_half = adreno_occupancy(full, half + 1, threads, gpu, shared, branchstack)
    assert more_full.occupancy <= lower.occupancy
    assert more_half.occupancy <= lower.occupancy
    assert 0.0 <= lower.occupancy <= 1.0
    limits = lower.details["wave_limits"]
    assert lower.waves_or_warps_active == min(limits.values())
    assert all(limits[name] == lower.waves_or_warps_active for name in lower.limiters)


# ---------------------------------------------------------------- Mali, AMD (occupancy.md B8)

@pytest.mark.parametrize("registers, occupancy, limiter", [
    (0, 1.0, "wave slots"), (32, 1.0, "wave slots"), (33, 0.5, "registers"), (64, 0.5, "registers")])
def test_mali(registers, occupancy, limiter):
    result = mali_occupancy(registers)
    assert result.occupancy == occupancy and result.limiter == limiter


def test_mali_over_64_registers_is_an_error():
    with pytest.raises(ValueError, match="64"):
        mali_occupancy(65)


@pytest.mark.parametrize("vgprs, waves", [(64, 16), (128, 8), (24, 16), (96, 10), (256, 4)])
def test_amd_rdna2_wave32(vgprs, waves):
    result = amd_occupancy(vgprs, 32, "rdna2")
    assert result.waves_or_warps_active == waves
    assert result.max_waves_or_warps == 16


def test_amd_worked_limiters():
    assert amd_occupancy(128, 32, "rdna2").limiter == "registers"
    assert amd_occupancy(64, 32, "rdna2").limiters == ("registers", "wave slots")
    assert amd_occupancy(32, 32, "rdna2").limiter == "wave slots"


def test_amd_granularity_rules():
    # RDNA2 wave32 allocates in 16s: 65 VGPRs → 80 → 12 waves
    assert amd_occupancy(65, 32, "rdna2").details["allocated_vgprs"] == 80
    assert amd_occupancy(65, 32, "rdna2").waves_or_warps_active == 12
    # RDNA2 wave64: 512 VGPRs, blocks of 8 → 8 wave64 slots, which RADV reports as 16 "Subgroups per SIMD" of 32
    # (radv_get_max_waves counts a wave64 as two on GFX10+; checked against RADV in test_mesa_compilers.py)
    wave64 = amd_occupancy(64, 64, "rdna2")
    assert (wave64.waves_or_warps_active, wave64.max_waves_or_warps, wave64.occupancy) == (16, 32, 0.5)
    # RDNA1 wave32: blocks of 8 only, 20 wave slots
    assert amd_occupancy(65, 32, "rdna1").details["allocated_vgprs"] == 72
    assert amd_occupancy(48, 32, "rdna1").waves_or_warps_active == 20
    # Navi31: 1536 wave32 VGPRs, blocks of 24
    assert amd_occupancy(128, 32, "rdna3").details["allocated_vgprs"] == 144
    assert amd_occupancy(128, 32, "rdna3").waves_or_warps_active == 10
    # GCN wave64: 256 VGPRs, blocks of 4, 10 waves; SGPRs limit
    assert amd_occupancy(24, 64, "gcn").waves_or_warps_active == 10
    assert amd_occupancy(64, 64, "gcn").waves_or_warps_active == 4
    assert amd_occupancy(16, 64, "gcn", sgprs=102).waves_or_warps_active == 7   # 800 // 112
    assert amd_occupancy(16, 64, "polaris").waves_or_warps_active == 8
    with pytest.raises(ValueError):
        amd_occupancy(16, 32, "gcn")


@FAST
@given(st.integers(0, 255), st.sampled_from(sorted(AMD_FAMILIES)), st.sampled_from([32, 64]))
def test_amd_more_vgprs_never_raise_occupancy(vgprs, family, wave_size):
    if wave_size not in AMD_FAMILIES[family].wave_sizes:
        return
    assert amd_occupancy(vgprs + 1, wave_size, family).occupancy <= amd_occupancy(vgprs, wave_size, family).occupancy


# ---------------------------------------------------------------- device → model

@pytest.mark.parametrize("name, arch", [
    ("NVIDIA H100 80GB HBM3", "sm_90"), ("NVIDIA H200", "sm_90"), ("NVIDIA GH200 480GB", "sm_90"),
    ("NVIDIA A100-SXM4-80GB", "sm_80"), ("NVIDIA GeForce RTX 3090", "sm_86"), ("NVIDIA A10G", "sm_86"),
    ("NVIDIA A10", "sm_86"), ("NVIDIA GeForce RTX 4090", "sm_89"), ("NVIDIA L4", "sm_89"),
    ("NVIDIA L40S", "sm_89"), ("NVIDIA GeForce RTX 3080 (NVK GA102)", "sm_86"), ("NVIDIA Titan V", None)])
def test_guess_nvidia_arch(name, arch):
    assert guess_nvidia_arch(name) == arch


def test_occupancy_for_device_nvidia():
    result = occupancy_for_device("NVIDIA H200", 128, 256)
    assert result.model == "nvidia sm_90" and result.occupancy == pytest.approx(0.25)
    by_vendor = occupancy_for_device({"name": "NVIDIA GeForce RTX 4090", "vendor_id": 0x10DE}, 32, (16, 16, 1))
    assert by_vendor.model == "nvidia sm_89" and by_vendor.waves_or_warps_active == 48


def test_occupancy_for_device_adreno_and_others():
    assert occupancy_for_device("Turnip Adreno (TM) 740", 28, 64).occupancy == pytest.approx(0.375)
    assert occupancy_for_device({"deviceName": "Adreno (TM) 740", "vendorID": 0x5143}, 24, (8, 8, 2)) \
        .waves_or_warps_active == 4
    assert occupancy_for_device("Adreno (TM) 740", 24, 128, subgroup_size=64).waves_or_warps_active == 8
    assert occupancy_for_device({"name": "Mali-G715", "vendor_id": 0x13B5}, 40).occupancy == 0.5
    assert occupancy_for_device("AMD Radeon RX 6800 XT (RADV NAVI21)", 128, 64).waves_or_warps_active == 8


class _Info:   # the shape of vk.DeviceInfo
    def __init__(self, name, vendor_id=None):
        self.name, self.vendor_id = name, vendor_id


def test_occupancy_for_device_accepts_info_objects():
    assert occupancy_for_device(_Info("NVIDIA A100-SXM4-40GB", 0x10DE), 40, 256).model == "nvidia sm_80"


def test_occupancy_for_device_vendor_id_spellings():
    assert occupancy_for_device({"name": "Adreno (TM) 740", "vendor_id": "0x5143"}, 28, 64).occupancy == 0.375
    with pytest.raises(ValueError, match="CPU device SwiftShader"):
        occupancy_for_device({"name": "SwiftShader Device (Subzero)", "device_type": 4}, 32, 64)


@pytest.mark.parametrize("device", [
    "llvmpipe (LLVM 15.0.6, 256 bits)", {"name": "llvmpipe (LLVM 15.0.6, 256 bits)", "vendor_id": 0x10005},
    _Info("llvmpipe (LLVM 15.0.6, 256 bits)")])
def test_cpu_device_has_no_model(device):
    with pytest.raises(ValueError, match=r"no occupancy model for CPU device llvmpipe.*registers are not a limit"):
        occupancy_for_device(device, 32, 64)


@pytest.mark.parametrize("device, pattern", [
    ({"name": "Intel(R) Arc(tm) A770 Graphics (DG2)", "vendor_id": 0x8086}, r"Intel.*A770.*known models: nvidia"),
    ("Some Unknown GPU", r"Some Unknown GPU.*known models.*adreno.*mali.*amd"),
    ("NVIDIA Titan V", r"NVIDIA Titan V.*arch="),
    ("Adreno (TM) 850", r"unknown Adreno GPU"),  # 830 / 840 are known since the newer Mesa build
    ({"name": "AMD Radeon Mystery", "vendor_id": 0x1002}, r"Mystery.*family="),
])
def test_unknown_devices_raise_clear_errors(device, pattern):
    with pytest.raises(ValueError, match=pattern):
        occupancy_for_device(device, 32, 64)


def test_guess_amd_family():
    assert guess_amd_family("AMD Radeon RX 7900 XTX (RADV NAVI31)") == "rdna3"
    assert guess_amd_family("AMD Radeon 780M (RADV GFX1103_R1)") == "rdna3_navi33"
    assert guess_amd_family("AMD Radeon RX 580 Series (RADV POLARIS10)") == "polaris"
    assert guess_amd_family("AMD Radeon RX 5700 XT (RADV NAVI10)") == "rdna1"


# ---------------------------------------------------------------- driver statistics (B9)

NVIDIA_STATS = {"Register Count": 68, "Binary Size": 3456, "Stack Size": 0,
                "Local Memory Size": 68719476736, "Shared Memory Size": 0}
TURNIP_STATS = {"Max Waves Per Core": 6, "Instruction Count": 210, "Code size": 1680, "NOPs Count": 12,
                "MOV Count": 20, "COV Count": 0, "Registers used": 32, "Half-registers used": 0,
                "STP Count": 0, "LDP Count": 0, "Early preamble": True}


def test_statistics_nvidia():
    normalised = registers_from_statistics(NVIDIA_STATS)
    assert normalised["driver"] == "nvidia"
    assert normalised["registers"] == 68 and normalised["register_unit"] == "scalar32"
    assert normalised["scratch_bytes"] == 0                       # sentinel means no local memory
    assert NVIDIA_STATS["Local Memory Size"] == NVIDIA_NO_LOCAL_MEMORY_SENTINEL
    spilling = registers_from_statistics({**NVIDIA_STATS, "Register Count": 255,
                                          "Local Memory Size": NVIDIA_NO_LOCAL_MEMORY_SENTINEL + 112})
    assert spilling["scratch_bytes"] == 112  # 2**36 + spilled bytes
    assert normalised["code_bytes"] == 3456 and normalised["shared_bytes"] == 0
    assert normalised["driver_max_waves"] is None and normalised["spills"] is None
    assert normalised["raw"] == NVIDIA_STATS
    assert registers_from_statistics({**NVIDIA_STATS, "Local Memory Size": 256})["scratch_bytes"] == 256
    assert occupancy_for_device("NVIDIA H200", normalised, 64).waves_or_warps_active == 28


def test_statistics_turnip_agrees_with_the_model():
    normalised = registers_from_statistics(TURNIP_STATS)
    assert normalised["driver"] == "turnip"
    assert (normalised["registers"], normalised["register_unit"]) == (32, "vec4")
    assert normalised["half_registers"] == 0 and normalised["driver_max_waves"] == 6
    assert normalised["spills"] == 0 and normalised["instructions"] == 210
    model = adreno_occupancy(normalised["registers"], normalised["half_registers"], 64, 740)
    assert model.waves_or_warps_active == normalised["driver_max_waves"]
    assert occupancy_for_device("Turnip Adreno (TM) 740", TURNIP_STATS, 64).waves_or_warps_active == 6


def test_statistics_other_drivers():
    radv = registers_from_statistics({"Driver pipeline hash": 1, "SGPRs": 24, "VGPRs": 64, "Spilled SGPRs": 0,
                                      "Spilled VGPRs": 2, "Code size": 900, "LDS size": 4096,
                                      "Scratch size": 0, "Subgroups per SIMD": 16})
    assert (radv["driver"], radv["registers"], radv["register_unit"]) == ("radv", 64, "vgpr")
    assert radv["scalar_registers"] == 24 and radv["driver_max_waves"] == 16 and radv["spills"] == 2
    assert radv["shared_bytes"] == 4096
    anv = registers_from_statistics({"Instruction Count": 100, "Spill Count": 3, "Fill Count": 3,
                                     "Max live registers": 40, "Max dispatch width": 16,
                                     "Scratch Memory Size": 1024, "Workgroup Memory Size": 0})
    assert (anv["driver"], anv["registers"], anv["spills"], anv["scratch_bytes"]) == ("anv", 40, 3, 1024)
    nvk = registers_from_statistics({"Instruction count": 50, "Code Size": 800, "Number of GPRs": 24,
                                     "SLM Size": 0})
    assert (nvk["driver"], nvk["registers"], nvk["register_unit"]) == ("nvk", 24, "scalar32")
    empty = registers_from_statistics({"Code Size": 10})                     # PanVK
    assert empty["registers"] is None and empty["register_unit"] is None


def test_statistics_unwraps_value_objects_and_rejects_executable_maps():
    wrapped = registers_from_statistics({"Register Count": {"value": 40, "description": "..."}})
    assert wrapped["registers"] == 40
    with pytest.raises(ValueError, match="one executable"):
        registers_from_statistics({"CS": {"Register Count": 40}})


def test_statistics_unit_mismatch_is_an_error():
    with pytest.raises(ValueError, match="vec4"):
        occupancy_for_device("Turnip Adreno (TM) 740", NVIDIA_STATS, 64)


# ---------------------------------------------------------------- pandas helper

def test_occupancy_table():
    table = occupancy_table(nvidia_occupancy, range(8, 257, 8), threads_per_block=256)
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns[:3]) == ["registers", "occupancy", "limiter"]
    assert len(table) == 32
    assert table.set_index("registers").loc[128, "occupancy"] == 0.25
    assert table["occupancy"].is_monotonic_decreasing
    adreno = occupancy_table(adreno_occupancy, [12, 16, 19, 24, 32, 48], local_size=64)
    assert adreno["active"].tolist() == [16, 12, 10, 8, 6, 4]


def test_results_are_occupancy_objects():
    for result in (nvidia_occupancy(32, 64), adreno_occupancy(10), mali_occupancy(10), amd_occupancy(10)):
        assert isinstance(result, Occupancy)
        assert math.isclose(result.occupancy, result.waves_or_warps_active / result.max_waves_or_warps)
        assert result.percent == pytest.approx(100 * result.occupancy)
