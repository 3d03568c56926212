"""ET-VK's int8 cooperative-matrix linear, ``linear_dq8ca_qw_coopmat.glsl`` (added in 4a95dff0af; at cff6f4dd32 its
yaml generates the 4-bit-weight variants ``linear_dq8ca_q4gsw_coopmat_buffer_{texture2d,buffer}_half``), and the
4-bit weight prepack it reads, ``pack_q4_linear_weight`` — dispatched directly with the C++'s conventions.

ET-VK's C++ (QuantizedLinear.cpp, ``pick_linear_dqa_qw_shader``) picks the coopmat kernel for ``linear_dq8ca_q4gsw``
only when: the weight is 4-bit, not gemv, the adapter ``supports_int8_cooperative_matrix()`` and
``can_use_q4gsw_coopmat`` holds — no bias (the variants are built with HAS_BIAS false), cooperative matrices,
``subgroup_size() == 64``, an AMD device ("validated on AMD-RDNA only"), a rank-2 buffer output of dtype half,
``M % 128 == 0``, ``N % 64 == 0``, ``K % 32 == 0``, ``group_size % 32 == 0``. The workbench dispatches the shader
itself on any device that has what it needs (below), with the C++'s conventions:

* bindings (``add_linear_dqa_qw_node``): output (half, scalar buffer ``[M, N]``), fp input (half; unused by the
  shader), int8 input (4H4W ivec4 buffer, block ``m4 · K4 + k4``), int8 input sums (per group and row; unused),
  input scales (half ``texture3d``, one texel per 4 rows), input zero points (int8 ``texture3d``, ``rgba8i``), packed
  weight (``pack_q4_linear_weight``: texture2d texel ``(k4, n8)`` or buffer ``n8 · K4 + k4``), weight sums (int,
  ``[groups, N]``), weight scales (half, ``[groups, N]``), bias (half; dummy), UBOs ``sizes_ubo(output)``,
  ``sizes_ubo(fp_input)``. glslc -O drops the unused ones; the workbench binds what the module declares.
* no push constants; spec constants ``{apply_bias, K4_per_group = ceil(group_size / 4), num_groups = K / group_size,
  N}`` at ids 3–6 (apply_bias is dropped with HAS_BIAS false).
* global ``{ceil(N / 64) · 256, ceil(M / 128), 1}``, local ``{256, 1, 1}`` (``coopmat_tile_dims``:
  128×64×32, 256 threads): one work group per 128×64 output tile.

What the device needs (the family's ``requires``, checked before anything is made): VK_KHR_cooperative_matrix with
a subgroup-scope int8 × int8 → int32 entry of the template's MMA size (16×16×16), fp16/fp32 accumulators of
MMA_M×MMA_N, and subgroups of the template's SUBGROUP_SIZE (64) lanes: the shader tiles its work group as
SG_GRID_X × SG_GRID_Y subgroups from ``gl_SubgroupID`` — with 32-lane subgroups, subgroups 4..7 would read shared
memory past the A tile and store rows of the next tile. ``tiling="sg32"`` expands ET-VK's template with
``SUBGROUP_SIZE=32, SG_GRID_X=4, SG_GRID_Y=2, MMA_K=32`` (256 threads still; the int8 size NVIDIA lists is
16×16×32): a workbench-made variant, named so, to check the arithmetic on 32-lane devices; ``tiling`` may also be a
dict of those yaml parameters.

Possible finding (not run here: no device with int8 cooperative matrices): B is staged in shared memory column-major
with a column stride of ``MMA_K / 4 + 1`` uints (the "+1 skew" against bank conflicts): 20 bytes at MMA_K 16, 36 at
32. Vulkan asks the Pointer and Stride of OpCooperativeMatrixLoadKHR to be aligned to the lesser of 16 bytes and a
column's natural alignment (VUID-RuntimeSpirv-OpCooperativeMatrixLoadKHR-08986, as recalled; a runtime rule the
validation layer cannot see), which a 20- or 36-byte stride is not. ``tiling="sg32_aligned"`` (or the workbench-only
key ``B_SKEW_U32``) replaces the skew, ``B_STRIDE_U32 = B_USEFUL_U32 + 4u`` (48 bytes at MMA_K 32), so a device that
rejects or mis-loads the skewed stride can be told apart from one whose arithmetic differs.

The reference is the shader's arithmetic in torch: per quant group g, ``acc = Σ int8_in · int4_w`` (int32),
``adjusted = acc - zp[m] · wsum[g, n]``, ``result += float(adjusted) · (float(in_scale[m]) · float(w_scale[g, n]))``
in fp32 (multiply, then add), then ``float16(result)``. With one group the sum is one product and the comparison is
exact; with more, a driver may fuse the multiply-add of the (non-``precise``) cooperative matrices, and
Vulkan lets float → half conversions round either way: the tolerance is one fp16 ulp of the largest output
(``atol``) on at most 5% of the elements (``max_mismatch``). ET-VK's float64 reference (dequantize the per-row int8
input and the per-group int4 weight, linear) is the ``ref64_max_abs_diff`` column.
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch

from ... import vk
from ...vk.spirv import reflect
from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, create_local_wg_size, int8_layout, packed_weight_output, packed_words
from .linear_q8ta_q8csw import check_template

TEMPLATE = "linear_dq8ca_qw_coopmat"
SINCE = "4a95dff0af"
WG_TILE_M, WG_TILE_N, WG_TILE_K, WG_SIZE = 128, 64, 32, 256  # kDq8caQ4gswCoopmatDims
TILINGS = {"sg32": {"SUBGROUP_SIZE": 32, "SG_GRID_X": 4, "SG_GRID_Y": 2, "MMA_K": 32},
           "sg32_aligned": {"SUBGROUP_SIZE": 32, "SG_GRID_X": 4, "SG_GRID_Y": 2, "MMA_K": 32, "B_SKEW_U32": 4}}
TILING_KEYS = ("SUBGROUP_SIZE", "SG_GRID_X", "SG_GRID_Y", "MMA_M", "MMA_N", "MMA_K", "B_SKEW_U32")
SKEW_LINE = "const uint B_STRIDE_U32    = B_USEFUL_U32 + 1u; // +1 skew"


def pack_q4_weight(w4: np.ndarray) -> np.ndarray:
    """``pack_q4_linear_weight``'s layout of a signed int4 ``[N, K]`` weight (values -8..7; K a multiple of 8):
    int32 texels ``[N8, K4, 4]`` (texture row n8, column k4), component r, nibble c (bits 4c..4c+3) = the weight of
    row ``8·n8 + r + 4·(c & 1)`` at column ``4·k4 + c // 2``, stored as ``value + 8``; rows past N hold 8 (zero)."""
    w4 = np.asarray(w4, dtype=np.int64)
    n, k = w4.shape
    if k % 8:
        raise ValueError(f"the int4 weight's K must be a multiple of 8, got {k}")
    n8 = math.ceil(n / 8)
    nib = np.full((8 * n8, k), 8, dtype=np.int64)
    nib[:n] = w4 + 8
    nib = nib.reshape(n8, 2, 4, k // 4, 4)  # [n8, half (rows +0 / +4), r, k4, j]
    words = np.zeros((n8, k // 4, 4), dtype=np.int64)
    for j in range(4):
        for half in range(2):
            words |= nib[:, half, :, :, j].transpose(0, 2, 1) << (4 * (2 * j + half))
    return words.astype(np.uint32).view(np.int32)


def int4_source_bytes(w4: np.ndarray) -> np.ndarray:
    """ET-VK's int4 weight data ``[N, K / 2]`` bytes: column k in byte k // 2, low nibble for even k, as
    ``value + 8``."""
    u = (np.asarray(w4, dtype=np.int64) + 8).astype(np.uint8)
    return np.ascontiguousarray(u[:, 0::2] | (u[:, 1::2] << 4))


def reference(q_in, zps, in_scales, w4, w_scales, group_size: int, fused: bool = False) -> torch.Tensor:
    """The shader's arithmetic (see the module docstring); `fused` does each group's multiply-add in one rounding."""
    m, k = q_in.shape
    groups = k // group_size
    ifs = in_scales.to(torch.float32)
    result = torch.zeros((m, w4.shape[0]), dtype=torch.float32)
    for g in range(groups):
        cols = slice(g * group_size, (g + 1) * group_size)
        acc = (q_in[:, cols].to(torch.int64) @ w4[:, cols].to(torch.int64).T).to(torch.int32)
        wsum = w4[:, cols].to(torch.int32).sum(1)
        adjusted = acc - zps.to(torch.int32)[:, None] * wsum[None, :]
        scales = ifs[:, None] * w_scales[g].to(torch.float32)[None, :]
        if fused:
            result = (adjusted.double() * scales.double() + result.double()).to(torch.float32)
        else:
            result = result + adjusted.to(torch.float32) * scales
    return result.to(torch.float16)


def reference_fp64(q_in, zps, in_scales, w4, w_scales, group_size: int) -> torch.Tensor:
    x = (q_in.double() - zps.double()[:, None]) * in_scales.double()[:, None]
    wf = w4.double() * w_scales.double().repeat_interleave(group_size, dim=0).T
    return x @ wf.T


def _tiling_params(tiling) -> dict:
    if tiling is None:
        return {}
    if isinstance(tiling, str):
        if tiling not in TILINGS:
            raise ValueError(f"{TEMPLATE}: tiling is None (ET-VK's yaml), one of {sorted(TILINGS)} or a dict of "
                             f"{list(TILING_KEYS)}; got {tiling!r}")
        return dict(TILINGS[tiling])
    params = {str(k): int(v) for k, v in dict(tiling).items()}
    unknown = sorted(set(params) - set(TILING_KEYS))
    if unknown:
        raise ValueError(f"{TEMPLATE}: tiling keys are {list(TILING_KEYS)}; got {unknown}")
    return params


ETVK_TILING = {"SUBGROUP_SIZE": 64, "SG_GRID_X": 2, "SG_GRID_Y": 2, "MMA_M": 16, "MMA_N": 16, "MMA_K": 16,
               "B_SKEW_U32": 1}  # linear_dq8ca_qw_coopmat.yaml at cff6f4dd32


def _problems(device, p: dict) -> list[str]:
    """What `device` lacks for the tiling `p` (empty: it can run it)."""
    mma = (p["MMA_M"], p["MMA_N"], p["MMA_K"])
    if not device.info.features.get("cooperative_matrix_khr"):
        return ["no VK_KHR_cooperative_matrix"]
    props = [r for r in device.cooperative_matrix_properties() if r["extension"] == "KHR" and r["scope"] == 3]
    int8 = [r for r in props if r["A"] == r["B"] == "sint8" and r["C"] == r["D"] == "sint32"]
    problems = []
    if not any((r["M"], r["N"], r["K"]) == mma for r in int8):
        have = sorted({f"{r['M']}x{r['N']}x{r['K']}" for r in int8}) or "none"
        problems.append(f"its int8 x int8 -> int32 sizes are {have}, not {mma[0]}x{mma[1]}x{mma[2]}")
    for ctype in ("float32", "float16"):
        if not any(r["M"] == mma[0] and r["N"] == mma[1] and r["C"] == ctype for r in props):
            problems.append(f"no {ctype} accumulator of {mma[0]}x{mma[1]}")
    if device.info.subgroup_size != p["SUBGROUP_SIZE"]:
        problems.append(f"its subgroups have {device.info.subgroup_size} lanes, the tiling expects "
                        f"{p['SUBGROUP_SIZE']} ({p['SG_GRID_X']}x{p['SG_GRID_Y']} subgroups from gl_SubgroupID; "
                        f"ET-VK's C++ gates on subgroup_size() == 64)")
    return problems


def _requires(p: dict):
    mma = (p["MMA_M"], p["MMA_N"], p["MMA_K"])

    def check(device) -> None:
        problems = _problems(device, p)
        if not problems:
            return
        fitting = [t for t, preset in TILINGS.items() if not _problems(device, {**ETVK_TILING, **preset})]
        raise vk.MissingFeatureError(
            f"{TEMPLATE} needs VK_KHR_cooperative_matrix with int8 A/B and int32 C at {mma[0]}x{mma[1]}x{mma[2]} "
            f"(subgroup scope) and {p['SUBGROUP_SIZE']}-lane subgroups; {device.info.name} "
            f"({device.info.driver_name}): {'; '.join(problems)}"
            f"{' — the workbench-made tiling ' + ' or '.join(map(repr, fitting)) + ' fits it' if fitting else ''}")
    return check


def device_refusal(device, tiling=None) -> str | None:
    """Why `device` cannot run the template at `tiling` (None: ET-VK's yaml tiling as at cff6f4dd32; "sg32",
    "sg32_aligned" or a dict as for the family), or None where it can: the `requires` check without making a
    Dispatch, so it needs no checkout and no data (benchmarks.coopmat_vs_etvk's refused rows)."""
    try:
        _requires({**ETVK_TILING, **_tiling_params(tiling)})(device)
    except vk.MissingFeatureError as error:
        return str(error)
    return None


def linear_dq8ca_qw_coopmat(gen: Codegen, shape=(128, 64), out_features: int = 64, *, group_size: int = 32,
                            weight_storage: str = "texture2d", bias: bool = False, tiling=None,
                            seed: int = 0) -> Dispatch:
    """``linear_dq8ca_q4gsw_coopmat_buffer_<weight_storage>_half``: int8 input ``[M, K]`` quantized per row (scale
    and zero point per row, as ET-VK's dynamic quantization makes them) × int4 group-symmetric weight ``[N, K]``
    (a half scale per group of `group_size` columns and output channel) → half ``[M, N]``. `tiling`: None (ET-VK's
    yaml), "sg32", "sg32_aligned" or a dict of yaml tile parameters and B_SKEW_U32 (a workbench-made variant)."""
    op = TEMPLATE
    sizes = tuple(int(s) for s in (shape if hasattr(shape, "__len__") else (shape,)))
    while len(sizes) > 2 and sizes[0] == 1:  # leading sizes of 1 ([..., M, K] with unit leading dims)
        sizes = sizes[1:]
    if len(sizes) != 2 or min(sizes) < 1:
        raise ValueError(f"{op}: the input is [M, K] (ET-VK's can_use_q4gsw_coopmat refuses rank > 2 outputs: the "
                         f"shader covers gl_WorkGroupID.xy only); given {sizes}")
    m, k = sizes
    n = int(out_features)
    group_size = int(group_size)
    if weight_storage not in ("texture2d", "buffer"):
        raise ValueError(f"{op}: weight_storage 'texture2d' or 'buffer' (the yaml's two variants), "
                         f"got {weight_storage!r}")
    if bias:
        raise ValueError(f"{op}: the variants are built with HAS_BIAS false (ET-VK's C++ sends a linear with a bias "
                         f"to the tiled kernel); expected bias=False, given {bias!r}")
    bad = [f"{what} {v} is not a multiple of {d}" for what, v, d in
           (("M", m, WG_TILE_M), ("N", n, WG_TILE_N), ("K", k, WG_TILE_K), ("group_size", group_size, WG_TILE_K))
           if v < 1 or v % d]
    if not bad and k % group_size:
        bad.append(f"K {k} is not a multiple of group_size {group_size}")
    if bad:
        raise ValueError(f"{op}: the shader's hard preconditions (M % 128, N % 64, K % 32, group_size % 32 == 0; "
                         f"can_use_q4gsw_coopmat): {'; '.join(bad)}")
    base = f"linear_dq8ca_q4gsw_coopmat_buffer_{weight_storage}_half"
    check_template(gen, base, op, SINCE)
    overrides = _tiling_params(tiling)
    params = dict(ETVK_TILING)  # B_SKEW_U32: the template's constant "+1 skew" of B's column stride in shared memory
    if gen is not None:
        params.update({key: int(gen.expand(base).params[key]) for key in TILING_KEYS if key != "B_SKEW_U32"})
    params.update(overrides)
    if params["SG_GRID_X"] * params["SG_GRID_Y"] * params["SUBGROUP_SIZE"] != WG_SIZE or \
            WG_TILE_M % (params["SG_GRID_Y"] * params["MMA_M"]) or WG_TILE_N % (params["SG_GRID_X"] * params["MMA_N"]) \
            or WG_TILE_K % params["MMA_K"] or params["MMA_K"] % 4 or params["B_SKEW_U32"] < 0:
        raise ValueError(f"{op}: a tiling must keep {WG_SIZE} threads (SG_GRID_X·SG_GRID_Y·SUBGROUP_SIZE; the C++'s "
                         f"local size) and split the 128x64x32 tile into MMA tiles; given {params}")
    variant = base
    if overrides and gen is not None:
        tag = "_".join(f"{key.lower()}{params[key]}" for key in TILING_KEYS if key in overrides)
        yaml = {key: v for key, v in overrides.items() if key != "B_SKEW_U32"}
        patches = [(SKEW_LINE, SKEW_LINE.replace("+ 1u; // +1", f"+ {params['B_SKEW_U32']}u; // +{params['B_SKEW_U32']}"))] \
            if params["B_SKEW_U32"] != 1 else []
        variant = gen.derive(base, f"{base}__workbench_{tag}", patches=patches, **yaml)

    g = torch.Generator().manual_seed(seed)
    groups = k // group_size
    q_in = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g)
    zps = torch.randint(-10, 11, (m,), dtype=torch.int8, generator=g)
    in_scales = (torch.rand(m, generator=g) * 0.02 + 0.01).to(torch.float16)
    w4 = torch.randint(-8, 8, (n, k), dtype=torch.int8, generator=g)
    w_scales = (torch.rand((groups, n), generator=g) * 0.02 + 0.005).to(torch.float16)
    expected = reference(q_in, zps, in_scales, w4, w_scales, group_size)
    ref64 = reference_fp64(q_in, zps, in_scales, w4, w_scales, group_size)
    peak = float(expected.abs().max())
    ulp = float(np.spacing(np.float16(peak))) if peak > 0 else 0.0

    m4, k4, n8 = m // 4, k // 4, math.ceil(n / 8)
    packed = pack_q4_weight(w4.numpy())  # [N8, K4, 4]
    wsums = torch.stack([w4[:, i * group_size:(i + 1) * group_size].to(torch.int32).sum(1) for i in range(groups)])
    in_sums = torch.stack([q_in[:, i * group_size:(i + 1) * group_size].to(torch.int32).sum(1) for i in range(groups)])
    fp_in = ((q_in.float() - zps.float()[:, None]) * in_scales.float()[:, None]).to(torch.float16)
    if weight_storage == "texture2d":
        weight_res = Resource("image", packed, extent=(k4, n8), fmt="rgba32i", name="t_packed_weight")
    else:
        weight_res = Resource("buffer", packed.reshape(-1), name="t_packed_weight")
    whcn = lambda *s: struct.pack("<4i", *(list(s) + [1] * (4 - len(s))))
    resources = [
        Resource("buffer", nbytes=2 * m * n, name="t_output"),
        Resource("buffer", fp_in.numpy().reshape(-1), name="t_input"),
        Resource("buffer", packed_words(int8_layout("4H4W"), q_in.reshape(1, 1, m, k)), name="t_packed_int8_input"),
        Resource("buffer", in_sums.numpy().astype(np.int32).reshape(-1), name="t_int8_input_sums"),
        Resource("image", in_scales.numpy().reshape(1, 1, m4, 4), extent=(m4, 1, 1), fmt="rgba16f",
                 name="t_int8_input_scales"),
        Resource("image", zps.numpy().reshape(1, 1, m4, 4), extent=(m4, 1, 1), fmt="rgba8i", name="t_int8_input_zps"),
        weight_res,
        Resource("buffer", wsums.numpy().astype(np.int32).reshape(-1), name="t_weight_sums"),
        Resource("buffer", w_scales.numpy().reshape(-1), name="t_weight_scales"),
        Resource("buffer", np.zeros(n, dtype=np.float16), name="t_bias"),
        Resource("ubo", whcn(n, m), name="output_sizes"),
        Resource("ubo", whcn(k, m), name="input_sizes"),
    ]
    if gen is not None:  # bind what the compiled module declares (glslc -O drops the unused ones)
        slots = {b.binding for b in reflect(bytes(gen.compile(variant).code)).bindings}
        resources = [r for i, r in enumerate(resources) if i in slots]
    spec = {3: 0, 4: math.ceil(group_size / 4), 5: groups, 6: n}
    global_size = (math.ceil(n / WG_TILE_N) * WG_SIZE, math.ceil(m / WG_TILE_M), 1)
    decode = lambda raw: torch.from_numpy(raw.view(np.float16)[:m * n].copy()).reshape(m, n)
    return Dispatch(op, variant, resources, b"", spec, global_size, (WG_SIZE, 1, 1), 0, decode, expected,
                    atol=ulp if groups > 1 else 0.0, max_mismatch=0.05 if groups > 1 else 0.0,
                    bytes_moved=m * k + 2 * m * n + packed.nbytes + 6 * groups * n + 3 * m,
                    macs=m * n * k, requires=_requires(params),
                    params={"shape": f"{m}x{k}->{n}", "group_size": group_size, "weight_storage": weight_storage,
                            "tiling": "etvk" if not overrides else str(overrides),
                            "mma": f"{params['MMA_M']}x{params['MMA_N']}x{params['MMA_K']}",
                            "subgroup_size": params["SUBGROUP_SIZE"],
                            "ref64_max_abs_diff": float((expected.double() - ref64).abs().max())})


def pack_q4_linear_weight(gen: Codegen, shape=(24, 64), *, storage: str = "texture2d", seed: int = 0) -> Dispatch:
    """ET-VK's prepack of a 4-bit ``[N, K]`` linear weight (``prepack_quantized_linear_weight``, nbits 4):
    ``pack_q4_linear_weight_{texture2d,buffer}``, the ``[N, K / 2]`` bytes read as a uint buffer, global
    ``{ceil(K4 / 2), N8, 1}`` (each thread writes two blocks) with ``create_local_wg_size``, push constants
    ``sizes_pc_of(packed)`` (WHCN ``{4·K4, N8, 1, 1}``) and ``orig_sizes = {K, N}``. Checked exactly against
    ``pack_q4_weight`` (numpy), the layout the coopmat kernel reads."""
    op = "pack_q4_linear_weight"
    if storage not in ("texture2d", "buffer"):
        raise ValueError(f"{op}: storage must be 'texture2d' or 'buffer', got {storage!r}")
    dims = tuple(int(s) for s in shape)
    while len(dims) > 2 and dims[0] == 1:
        dims = dims[1:]
    if len(dims) != 2 or min(dims) < 1:
        raise ValueError(f"{op}: the weight is [N, K], given {tuple(shape)}")
    n, k = dims
    if k % 8:
        raise ValueError(f"{op}: K must be a multiple of 8 (VK_CHECK_COND(K % 8 == 0) for 4-bit weights in "
                         f"prepack_quantized_linear_weight); got K={k}")
    variant = f"{op}_{storage}"
    check_template(gen, variant, op)
    w4 = torch.randint(-8, 8, (n, k), dtype=torch.int8, generator=torch.Generator().manual_seed(seed)).numpy()
    packed = pack_q4_weight(w4)
    n8, k4 = packed.shape[:2]
    staged = int4_source_bytes(w4).reshape(-1).view(np.int32)  # N·K/2 bytes, a multiple of 4
    out, decode = packed_weight_output(n8, k4, storage, name="t_packed_int4_weight")
    push = struct.pack("<4i2i", 4 * k4, n8, 1, 1, k, n)
    global_size = (math.ceil(k4 / 2), n8, 1)
    return Dispatch(op, variant, [out, Resource("buffer", staged, name="t_int4_weight")], push, {}, global_size,
                    create_local_wg_size(global_size), 0, decode, torch.from_numpy(packed),
                    bytes_moved=staged.nbytes + packed.nbytes, params={"shape": f"{n}x{k}", "storage": storage})
