"""The workbench's 4-bit group-wise GEMV (``shaders/q4_gemv.glsl``): decode's linear, ``out[M, N] = x[M, K] ·
dequant(q, scales)[N, K]ᵀ`` for M = 1..8, the weight int4 group-wise symmetric as ET-VK's LLM export quantizes it
(torchao ``IntxWeightOnlyConfig(int4, PerGroup(group_size))``: zero points 0, values -8..7, fp32 scales per
``group_size`` columns).

    spec = Q4GemvSpec(n=2048, k=2048, group_size=32)            # M = 1, the default variant
    x, q, scales = random_problem(spec)                          # fp32 x, int4 q [N, K], scales [N, K / group]
    with Q4GemvRun(device, spec, x, q, scales) as run:
        run.run(); out = run.output()                            # [M, N] fp32
    check(device, spec)                                          # {"max_abs_diff", "tolerance", "correct"}

Weight layout (``pack_weights``): K contiguous per row, word j of row n holds ``q[n, 8j + i] + 8`` in nibble i
(ET-VK's ``value + 8``), rows ``K / 8`` words apart. A thread reads ``vec`` words (a 16-byte uvec4 at vec = 4) of
each of its ``rows`` rows per step and the ``threads_k`` threads of a row set take neighbouring vectors, so a
subgroup's load reads one contiguous run per row — where ET-VK's ``q4gsw_linear_gemv_coop__w_4x8`` (nc buffer
layout, ``k4 · N8 + n8``) has its K-neighbouring lanes read 16 bytes each from lines ``N8 · 16`` bytes apart. The
layout does not depend on the variant: one packed weight serves every point of the tuning space.

``layout="tiled"`` (``shaders/q4_gemv_tiled.glsl``, ``pack_weights_tiled`` / ``pack_scales_tiled``): 4-row tiles,
uvec4 (t, c) = rows 4t .. 4t + 3 × K values 8c .. 8c + 7, so one 16-byte load serves 4 rows with one activation
vector; the scales in the same tiles (4 fp16 per group). Its builds (one dequantize: the lop3 form, fp16 activations
and scales): ``unroll`` steps batched or in a ``prefetch`` ring, ``act_shared``, ``max_groups`` (persistent work
groups), ``x_regs`` (a thread's activations read once into registers; ``acc16`` fp16 sums per tile; ``lane_chunks``
a thread's chunks consecutive in K, the tile's vectors permuted so — the one layout that depends on the build).
On the H200 the weight stream of these builds reaches 90–98 % of copy and the full kernels 48–80 %: the
dequantize-and-multiply, not the loads, is what is left (docs/llm-decode.md).

Variants (the tuning space, ``VARIANT_CHOICES``): ``threads_k`` (threads along K per row set), ``rows`` (rows per
thread: activations read once per step for all of them), ``local_x`` (work group size; rows per work group =
rows · local_x / threads_k), ``vec`` (uint / uvec2 / uvec4 weight loads), ``unroll`` (vectors of each row loaded
before the first is used: unroll · rows loads in flight per thread), ``dequant`` (``"convert"``: signed
bit-field extract + int→float, ``"magic"``: the nibble or-ed into a float's mantissa, no conversion, or
``"half2"``: the same trick into fp16 pairs, a word's 8 products summed in packed fp16, needs fp16 activations),
``reduce`` (``"shared"``: a tree in shared memory, or ``"subgroup"``: shuffles), ``act_dtype`` / ``scale_dtype``
(``"half"``: fp16 activations / scales read as packed pairs, computed in fp32).

Reference: float64 ``x @ dequantize_affine(q, scales)ᵀ`` (torchao, fp32 dequantized weight) with x and the scales as
the shader reads them (rounded to fp16 for the half variants). The shader sums in fp32 in its own order (one
scale per vector's dot product); the tolerance is the bound of any summation order, ``(K + 2) · 2⁻²⁴ ·
max(|x| @ |w|ᵀ)``, plus ``HALF2_ROUNDING · max(|x| @ |w|ᵀ)`` for half2's fp16 sums within a word.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import numpy as np

from . import KernelRun, linear_global_size

SHADER = "q4_gemv"
#: Weight layouts: "rows" (each row's K contiguous: ``shaders/q4_gemv.glsl``) and "tiled" (4-row tiles, a 16-byte
#: vector = 4 rows × 8 K values, scales in the same tiles: ``shaders/q4_gemv_tiled.glsl``).
LAYOUTS = ("rows", "tiled", "mma")
TILED_ONLY = ("act_shared", "max_groups", "prefetch", "x_regs", "acc16", "lane_chunks")
#: Activation registers a thread of the x_regs build holds at most: M · ceil(K / 8 / threads_k) vectors of 8.
MAX_X_VECTORS = 16
DEQUANTS = ("magic", "convert", "half2", "dq8", "mma")
#: Relative rounding of half2's packed-fp16 sum of a word's 8 products (4 multiply-adds, fused or not: γ₈ of fp16).
HALF2_ROUNDING = 8 * 2.0 ** -11
REDUCES = ("shared", "subgroup")
DTYPES = ("float", "half")
ACT_DTYPES = DTYPES + ("int8",)  # int8: activations quantized per token (torchao's 8da4w), dequant "dq8"
#: The tuning space's axes (every combination valid where local_x % threads_k == 0 and group_size % (8·vec) == 0).
VARIANT_CHOICES = {"threads_k": (4, 8, 16, 32, 64, 128, 256), "rows": (1, 2, 4, 8), "local_x": (32, 64, 128, 256),
                   "vec": (1, 2, 4), "unroll": (1, 2, 4, 8), "dequant": DEQUANTS, "reduce": REDUCES}
#: unroll · rows weight vectors held per thread at most (registers: 16 uvec4 are 64 of them).
MAX_VECTORS_IN_FLIGHT = 16
MAX_M = 8
#: The tensor-core build (dequant="mma", layout="mma", ``shaders/q4_gemv_mma.glsl``): its MMA shape is 16 weight rows
#: x 32 K values x MMA_N columns (N from the device's VkCooperativeMatrixPropertiesKHR: `mma_sizes`); tokens 1..N.
MMA_N = (8, 16)
MMA_MEM = ("uvec4", "uint")
MMA_TM, MMA_TK, MMA_ROWS = 16, 32, 32  # an A matrix's rows, the MMA's K, a work group's rows (two A matrices)
MMA_LOCAL_X = (32, 64, 128, 256, 512)  # 32 · subgroups along K
MMA_DIAGNOSTICS = {0: "", 2: "_diag_weights", 5: "_diag_cached", 9: "_diag_mma"}
#: K order of a 32-byte staged row (and of the activations' packed columns): bytes 4i .. 4i + 3 of word pair
#: (lo, hi) of source word w hold K values 8w + 0, 2, 4, 6 (lo) and 8w + 1, 3, 5, 7 (hi).
MMA_K_PERM = np.array([8 * (p // 8) + 2 * (p % 4) + (p // 4) % 2 for p in range(32)])


def _choice(what: str, value, allowed):
    if value not in allowed:
        raise ValueError(f"q4_gemv: {what} must be one of {list(allowed)}, got {value!r}")


@dataclass(frozen=True)
class Q4GemvSpec:
    """``out[m, n] = Σ_k x[m, k] · q[n, k] · scale[n, k // group_size]`` (fp32 accumulate and out); the variant's
    fields are the tuning space (module docstring)."""

    n: int
    k: int
    group_size: int = 32
    m: int = 1
    threads_k: int = 32
    rows: int = 4
    local_x: int = 128
    vec: int = 4
    unroll: int = 1
    dequant: str = "magic"
    reduce: str = "shared"
    act_dtype: str = "float"
    scale_dtype: str = "float"
    diagnostic: int = 0  # wrong results by design (needs act_dtype "half"): 1 loads only, 2 weight loads only,
    #                      3–8 the tiled layout's splits (the refusal below lists them)
    layout: str = "rows"
    act_shared: bool = False  # tiled: activations staged in shared memory once per work group
    max_groups: int = 0       # tiled: work groups at most (0: one tile set each; else each loops over tile sets)
    prefetch: bool = False    # tiled: `unroll` steps kept in flight in a ring (refilled before each step computes)
    x_regs: bool = False      # tiled: each thread's activations in registers, work groups loop over tiles
    acc16: bool = False       # tiled + x_regs: a thread's sums of a row pair in packed fp16, converted once a tile
    lane_chunks: bool = False  # tiled + x_regs: a thread's chunks consecutive in K (the tile's vectors permuted)
    mma_n: int = 8            # dequant="mma": the MMA's N (8 or 16; listed by the device: `mma_sizes`)
    mma_mem: str = "uvec4"    # dequant="mma": the arrays its matrices load from, as "uvec4" or "uint" (same bytes)

    def __post_init__(self):
        for name in ("n", "k", "group_size", "m"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"q4_gemv: {name} must be a positive integer, got {value!r}")
            object.__setattr__(self, name, int(value))
        if self.dequant == "mma" or self.layout == "mma":
            self._check_mma()
            return
        if self.mma_n != 8 or self.mma_mem != "uvec4":
            raise ValueError(f"q4_gemv: mma_n and mma_mem belong to dequant='mma', got mma_n={self.mma_n!r}, "
                             f"mma_mem={self.mma_mem!r} with dequant={self.dequant!r}")
        if self.m > MAX_M:
            raise ValueError(f"q4_gemv: m (activation rows) must be 1..{MAX_M} (a GEMV: one weight pass, "
                             f"M·rows accumulators per thread), got {self.m}")
        for name in ("threads_k", "rows", "local_x", "vec", "unroll", "dequant", "reduce"):
            _choice(name, getattr(self, name), VARIANT_CHOICES[name])
        _choice("act_dtype", self.act_dtype, ACT_DTYPES)
        _choice("scale_dtype", self.scale_dtype, DTYPES)
        if self.diagnostic not in range(9) or (self.diagnostic in (3, 4) and not self.x_regs) \
                or (self.diagnostic >= 5 and self.layout != "tiled") or (self.diagnostic >= 6 and self.x_regs):
            raise ValueError(f"q4_gemv: diagnostic is 0, 1 (loads only), 2 (weight loads only), with x_regs 3 "
                             f"(weight and scale loads only) or 4 (arithmetic without scale loads), with "
                             f"layout='tiled' 5 (the first 8 tiles' data only: the arithmetic's own time) and, "
                             f"without x_regs, 6 / 7 / 8 (5 without the bias operations / the per-word conversion / "
                             f"both), got {self.diagnostic!r}")
        if (self.dequant == "half2" or (self.diagnostic and self.dequant != "dq8")) and self.act_dtype != "half":
            raise ValueError(f"q4_gemv: dequant='half2' and the diagnostic read fp16 activations and need "
                             f"act_dtype='half', got act_dtype={self.act_dtype!r}")
        if self.local_x % self.threads_k:
            raise ValueError(f"q4_gemv: local_x must be a multiple of threads_k (whole row sets per work group), "
                             f"got local_x={self.local_x}, threads_k={self.threads_k}")
        per_step = self.rows // 4 if self.layout == "tiled" else self.rows  # 16-byte tiles hold 4 rows
        if self.unroll * per_step > MAX_VECTORS_IN_FLIGHT:
            raise ValueError(f"q4_gemv: unroll·rows (weight vectors held per thread) must be at most "
                             f"{MAX_VECTORS_IN_FLIGHT}, got unroll={self.unroll}, rows={self.rows}")
        if self.layout != "tiled" and self.group_size % (8 * self.vec):
            raise ValueError(f"q4_gemv: group_size must be a multiple of 8·vec = {8 * self.vec} (one weight load "
                             f"stays inside one scale group), got group_size={self.group_size} with vec={self.vec}")
        _choice("layout", self.layout, LAYOUTS)
        if self.layout == "tiled":
            self._check_tiled()
        else:
            extra = {name: getattr(self, name) for name in TILED_ONLY if getattr(self, name)}
            if extra:
                raise ValueError(f"q4_gemv: {', '.join(TILED_ONLY)} belong to layout='tiled', got layout="
                                 f"{self.layout!r} with {extra}")
        if (self.dequant == "dq8") != (self.act_dtype == "int8"):
            raise ValueError(f"q4_gemv: int8 activations and dequant='dq8' go together (integer dot products on "
                             f"activations quantized per token), got dequant={self.dequant!r}, "
                             f"act_dtype={self.act_dtype!r}")
        if self.dequant == "dq8" and self.layout != "tiled":
            raise ValueError(f"q4_gemv: dequant='dq8' is a build of layout='tiled' (x_regs, lane_chunks), got "
                             f"layout={self.layout!r}")
        if self.k % self.group_size:
            raise ValueError(f"q4_gemv: K must be a multiple of group_size (whole scale groups, as torchao's "
                             f"PerGroup and ET-VK's export need), got K={self.k}, group_size={self.group_size}")

    def _check_tiled(self):
        if self.dequant == "dq8":
            self._check_dq8()
        fixed = {"dequant": self.dequant if self.dequant == "dq8" else "half2",
                 "act_dtype": "int8" if self.dequant == "dq8" else "half", "scale_dtype": "half",
                 "reduce": "subgroup", "vec": 4}
        wrong = {name: getattr(self, name) for name, value in fixed.items() if getattr(self, name) != value}
        if wrong:
            raise ValueError(f"q4_gemv: layout='tiled' is one build of {fixed} (16-byte tiles, fp16 pairs), got "
                             f"{wrong}")
        if self.rows not in (4, 8):
            raise ValueError(f"q4_gemv: layout='tiled' takes rows 4 or 8 (one or two 4-row tiles a thread), got "
                             f"rows={self.rows}")
        if self.group_size % 8:
            raise ValueError(f"q4_gemv: layout='tiled' needs group_size a multiple of 8 (a chunk of 8 K values in "
                             f"one scale group), got {self.group_size}")
        if isinstance(self.max_groups, bool) or not isinstance(self.max_groups, (int, np.integer)) \
                or self.max_groups < 0:
            raise ValueError(f"q4_gemv: max_groups must be 0 (no cap) or a positive integer, got "
                             f"{self.max_groups!r}")
        if self.x_regs and self.m * self.steps > MAX_X_VECTORS:
            raise ValueError(f"q4_gemv: x_regs holds M·ceil(K / 8 / threads_k) activation vectors a thread, at most "
                             f"{MAX_X_VECTORS}; got M={self.m}, K={self.k}, threads_k={self.threads_k}: "
                             f"{self.m * self.steps} (raise threads_k)")
        if self.x_regs and (self.prefetch or self.act_shared or self.unroll != 1):
            raise ValueError(f"q4_gemv: x_regs loads a whole tile ahead (no unroll, prefetch or act_shared), got "
                             f"unroll={self.unroll}, prefetch={self.prefetch}, act_shared={self.act_shared}")
        if self.lane_chunks and not self.x_regs:
            raise ValueError("q4_gemv: lane_chunks is a build of x_regs (a thread's chunks fixed per tile), got "
                             "x_regs=False")
        if self.acc16 and not self.x_regs:
            raise ValueError("q4_gemv: acc16 is a build of x_regs (fp16 sums over a thread's chunks of a tile), got "
                             "x_regs=False")
        for name in ("act_shared", "prefetch", "x_regs", "acc16", "lane_chunks"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"q4_gemv: {name} must be True or False, got {getattr(self, name)!r}")

    def _check_dq8(self):
        need = {"x_regs": True, "lane_chunks": True, "rows": 4, "acc16": False}
        wrong = {name: getattr(self, name) for name, value in need.items() if getattr(self, name) != value}
        if self.diagnostic not in (0, 5):
            wrong["diagnostic"] = self.diagnostic  # only the cache-resident build (5) exists for dq8
        if wrong:
            raise ValueError(f"q4_gemv: dequant='dq8' is one build of {need} (a thread's activations in "
                             f"registers, its chunks consecutive in K, one tile a thread), got {wrong}")

    def _check_mma(self):
        """The tensor-core build: one set of options besides its own (mma_n, local_x = 32 · subgroups along K,
        unroll = K steps loaded ahead, diagnostic 0 / 2 / 5 / 9)."""
        need = {"dequant": "mma", "layout": "mma", "act_dtype": "int8", "scale_dtype": "half"}
        wrong = {name: getattr(self, name) for name, value in need.items() if getattr(self, name) != value}
        if wrong:
            raise ValueError(f"q4_gemv: the tensor-core build is {need} (int4 weights widened to int8, activations "
                             f"int8 per token, fp16 group scales), got {wrong}")
        defaults = {f.name: f.default for f in fields(self)}
        fixed = ("threads_k", "rows", "vec", "reduce", "max_groups") + TILED_ONLY
        extra = {name: getattr(self, name) for name in fixed if getattr(self, name) != defaults[name]}
        if extra:
            raise ValueError(f"q4_gemv: dequant='mma' takes mma_n, mma_mem, local_x (32 · subgroups along K), unroll "
                             f"(K steps loaded ahead) and diagnostic; {', '.join(extra)} belong to the other builds, got "
                             f"{extra}")
        _choice("mma_n", self.mma_n, MMA_N)
        _choice("mma_mem", self.mma_mem, MMA_MEM)
        _choice("local_x", self.local_x, MMA_LOCAL_X)
        _choice("unroll", self.unroll, VARIANT_CHOICES["unroll"])
        if self.diagnostic not in MMA_DIAGNOSTICS:
            raise ValueError(f"q4_gemv: dequant='mma' has diagnostic 0, 2 (the weight stream alone), 5 (the first 8 "
                             f"row tiles' data: cache-resident) or 9 (the MMAs alone), got {self.diagnostic!r}")
        if self.m > self.mma_n:
            raise ValueError(f"q4_gemv: dequant='mma' takes 1..mma_n tokens (the MMA's N columns hold tokens x "
                             f"scale groups), got m={self.m} with mma_n={self.mma_n}")
        if self.group_size % MMA_TK:
            raise ValueError(f"q4_gemv: dequant='mma' needs group_size a multiple of {MMA_TK} (one MMA's K in one "
                             f"scale group), got {self.group_size}")
        if self.k % self.group_size:
            raise ValueError(f"q4_gemv: K must be a multiple of group_size (whole scale groups, as torchao's "
                             f"PerGroup and ET-VK's export need), got K={self.k}, group_size={self.group_size}")

    # ------------------------------------------------------------------ the tensor-core build's geometry
    @property
    def slots(self) -> int:
        """mma: scale groups one accumulator holds (its N columns = slots x tokens)."""
        return self.mma_n // self.m

    @property
    def batch_steps(self) -> int:
        """mma: K steps (32 values) per batch: the slots' groups, scaled together."""
        return self.slots * self.group_size // MMA_TK

    @property
    def batches(self) -> int:
        return math.ceil(self.groups / self.slots)

    @property
    def subgroups_k(self) -> int:
        """mma: subgroups along K in a work group."""
        return self.local_x // 32

    # ------------------------------------------------------------------ the variant
    @property
    def shader(self) -> str:
        if self.dequant == "mma":
            return f"{SHADER}_mma"
        if self.dequant == "dq8":
            return f"{SHADER}_dq8"
        return SHADER if self.layout == "rows" else f"{SHADER}_tiled"

    @property
    def steps(self) -> int:
        """Chunks of 8 K values a thread of the tiled layout computes per tile: ceil(K / 8 / threads_k)."""
        return math.ceil(self.k / 8 / self.threads_k)

    @property
    def scale_run(self) -> int:
        """Chunks of a thread that share one scale load: with lane_chunks the chunks per group or the steps, when
        one divides the other; else 1."""
        per_group, steps = self.group_size // 8, self.steps
        if self.lane_chunks and (per_group % steps == 0 or steps % per_group == 0):
            return min(per_group, steps)
        return 1

    @property
    def fp16_rounding(self) -> float:
        """The relative error bound of the variant's fp16 arithmetic (0 for the fp32 builds): a word's 8 products
        summed in 4 packed multiply-adds and its two halves (HALF2_ROUNDING); acc16 adds a scaling multiply-add per
        chunk over the thread's `steps` chunks."""
        if self.dequant != "half2":
            return 0.0
        return HALF2_ROUNDING + (self.steps + 1) * 2.0 ** -11 * bool(self.acc16)

    def shared_bytes(self) -> int:
        """Shared memory the variant declares (checked against the device's limit)."""
        if self.dequant == "mma":  # per subgroup: two staged 32 x 32-byte A row sets, its fp32 sums (32 x N)
            return self.subgroups_k * (2 * MMA_ROWS * MMA_TK + 4 * MMA_ROWS * self.mma_n)
        if self.layout == "rows":
            return 4 * self.m * self.rows * self.local_x
        return 4 * self.m * self.rows * (self.local_x // 4) + (2 * self.m * self.k if self.act_shared else 16)

    @property
    def defines(self) -> dict:
        if self.dequant == "mma":
            return {"M": self.m, "TN": self.mma_n, "KS": self.subgroups_k, "U": self.unroll, "S": self.slots,
                    "SPB": self.batch_steps, "MEM_UINT": self.mma_mem == "uint", "DIAG": int(self.diagnostic)}
        if self.dequant == "dq8":
            return {"M": self.m, "TK": self.threads_k, "LOCAL": self.local_x, "STEPS": self.steps,
                    "PG": self.group_size // 8, "USE_INT_DOT_EXT": 1, "DIAG_LOADS": int(self.diagnostic)}
        if self.layout == "tiled":
            return {"M": self.m, "ROWS": self.rows, "TK": self.threads_k, "LOCAL": self.local_x,
                    "UNROLL": self.unroll, "ACT_SHARED": bool(self.act_shared), "PREFETCH": bool(self.prefetch),
                    "KC8": self.m * self.k // 8 if self.act_shared else 1, "DIAG_LOADS": int(self.diagnostic),
                    "X_REGS": bool(self.x_regs), "STEPS": self.steps if self.x_regs else 1, "ACC16": bool(self.acc16),
                    "LANE_CHUNKS": bool(self.lane_chunks), "RUN": self.scale_run}
        return {"M": self.m, "ROWS": self.rows, "TK": self.threads_k, "LOCAL": self.local_x, "VEC": self.vec,
                "UNROLL": self.unroll, "DEQUANT_MAGIC": self.dequant == "magic",
                "DEQUANT_HALF2": self.dequant == "half2", "DIAG_LOADS": int(self.diagnostic),
                "REDUCE_SUBGROUP": self.reduce == "subgroup",
                "ACT_HALF": self.act_dtype == "half", "SCALE_HALF": self.scale_dtype == "half"}

    @property
    def variant(self) -> str:
        if self.dequant == "mma":
            return (f"{SHADER}_m{self.m}_mma16x{self.mma_n}x32_ks{self.subgroups_k}_u{self.unroll}"
                    + ("_w32" if self.mma_mem == "uint" else "") + MMA_DIAGNOSTICS[int(self.diagnostic)])
        return (f"{SHADER}_m{self.m}_r{self.rows}_t{self.threads_k}_l{self.local_x}_v{self.vec}"
                + (f"_u{self.unroll}" if self.unroll > 1 else "") + f"_{self.dequant}"
                f"_{self.reduce}" + ("_xh" if self.act_dtype == "half" else "")
                + ("_sh" if self.scale_dtype == "half" else "")
                + (f"_tiled{'_pf' if self.prefetch else ''}{'_xs' if self.act_shared else ''}"
                   f"{f'_g{self.max_groups}' if self.max_groups else ''}{'_xr' if self.x_regs else ''}"
                   f"{'_a16' if self.acc16 else ''}{'_lc' if self.lane_chunks else ''}"
                   if self.layout == "tiled" else "")
                + {0: "", 1: "_diag_loads", 2: "_diag_weights", 3: "_diag_weights_scales",
                   4: "_diag_no_scales", 5: "_diag_cached", 6: "_diag_cached_nobias", 7: "_diag_cached_nocvt",
                   8: "_diag_cached_nobias_nocvt"}[int(self.diagnostic)])

    def params(self) -> dict:
        """The variant's fields as row columns."""
        return {"threads_k": self.threads_k, "rows": self.rows, "local_x": self.local_x, "vec": self.vec,
                "unroll": self.unroll, "dequant": self.dequant, "reduce": self.reduce, "act_dtype": self.act_dtype,
                "scale_dtype": self.scale_dtype, "rows_per_group": self.rows_per_group,
                "diagnostic": int(self.diagnostic),
                "layout": self.layout, "act_shared": bool(self.act_shared), "max_groups": self.max_groups,
                "prefetch": bool(self.prefetch), "x_regs": bool(self.x_regs), "acc16": bool(self.acc16),
                "lane_chunks": bool(self.lane_chunks), "mma_n": self.mma_n,
                "mma_mem": self.mma_mem}

    def with_shape(self, n: int, k: int, group_size: int | None = None, m: int | None = None) -> "Q4GemvSpec":
        return replace(self, n=n, k=k, group_size=group_size or self.group_size, m=m or self.m)

    def spec_constants(self) -> dict:
        """None: the variant is compile-time defines."""
        return {}

    def check_device(self, device) -> None:
        """The subgroup reduction relies on whole subgroups of neighbouring invocations; half2 on fp16 arithmetic;
        mma on KHR cooperative matrices of its shape (`mma_unsupported_reason`)."""
        if self.dequant == "mma":
            reason = mma_unsupported_reason(device, self.mma_n)
            if reason:
                raise ValueError(f"q4_gemv: dequant='mma' {reason}")
        if self.dequant == "dq8" and not device.info.features.get("integer_dot_product"):
            raise ValueError(f"q4_gemv: dequant='dq8' needs packed int8 dot products (shaderIntegerDotProduct); "
                             f"{device.info.name} does not offer it")
        if self.dequant == "half2" and not device.info.features.get("shader_float16"):
            raise ValueError(f"q4_gemv: dequant='half2' needs fp16 arithmetic (shaderFloat16); {device.info.name} "
                             f"does not offer it")
        limit = device.info.shared_memory_bytes
        if self.shared_bytes() > limit:
            raise ValueError(f"q4_gemv: this variant needs {self.shared_bytes()} bytes of shared memory "
                             f"({'activations staged: 2·M·K, ' if self.act_shared else ''}the reduction); "
                             f"{device.info.name} offers {limit}")
        size = device.info.subgroup_size
        if self.reduce == "subgroup" and self.local_x % size:
            raise ValueError(f"q4_gemv: reduce='subgroup' needs local_x a multiple of the subgroup size; "
                             f"{device.info.name} has {size} lanes, local_x={self.local_x}")

    # ------------------------------------------------------------------ the dispatch
    @property
    def local_size(self) -> tuple[int, int, int]:
        return (self.local_x, 1, 1)

    @property
    def rows_per_group(self) -> int:
        if self.dequant == "mma":
            return MMA_ROWS
        return self.rows * self.local_x // self.threads_k

    @property
    def work_groups(self) -> int:
        needed = math.ceil(self.n / self.rows_per_group)
        return min(needed, self.max_groups) if self.max_groups else needed

    @property
    def threads(self) -> int:
        return self.work_groups * self.local_x

    def global_size(self, device=None) -> tuple[int, int, int]:
        if device is None:
            return (self.threads, 1, 1)
        return linear_global_size(device, self.threads, self.local_x)

    def push_constants(self) -> bytes:
        return np.array([self.n, self.k, self.group_size, self.groups], np.int32).tobytes()

    # ------------------------------------------------------------------ traffic
    @property
    def groups(self) -> int:
        return self.k // self.group_size

    def weight_bytes(self) -> int:
        return self.n * self.k // 2

    def scale_bytes(self) -> int:
        if self.dequant == "mma":  # the packed scale tiles: 32 rows x N fp16 per batch (tokens repeat a group's)
            return math.ceil(self.n / MMA_ROWS) * self.batches * MMA_ROWS * self.mma_n * 2
        return self.n * self.groups * (2 if self.scale_dtype == "half" else 4)

    def bytes_read(self) -> int:
        if self.dequant == "mma":  # activations as the masked int8 columns (N per 32 K values), scale and zero
            return self.weight_bytes() + self.scale_bytes() + self.k * self.mma_n + 8 * self.m + 4 * self.n  # R[n]
        if self.dequant == "dq8":  # 16 bytes per 8 activations (even, odd, the chunk's sum), scale and zero point,
            return self.weight_bytes() + self.scale_bytes() + 2 * self.m * self.k + 8 * self.m + 4 * self.n  # R[n]
        return self.weight_bytes() + self.scale_bytes() + self.m * self.k * (2 if self.act_dtype == "half" else 4)

    def bytes_written(self) -> int:
        return 4 * self.m * self.n

    def bytes_moved(self) -> int:
        return self.bytes_read() + self.bytes_written()

    def macs(self) -> int:
        return self.m * self.n * self.k

    def weight_bytes_per_step(self) -> int:
        """Weight bytes one thread loads per iteration of its K loop (tiled: a 16-byte vector holds 4 rows; x_regs
        loads a whole tile, its `steps` vectors, per iteration)."""
        if self.dequant == "mma":
            return 16 * self.unroll
        if self.layout == "tiled":
            return 16 * (self.rows // 4) * (self.steps if self.x_regs else self.unroll)
        return 4 * self.vec * self.rows * self.unroll

    def pack(self, q, scales) -> tuple[np.ndarray, np.ndarray]:
        """(weight words, scale words) as this layout's shader reads them (uint32, flat)."""
        if self.dequant == "mma":
            return pack_weights_mma(q).reshape(-1), pack_scales_mma(scales, self)
        if self.layout == "tiled":
            words = pack_weights_tiled(q)  # [T, K / 8, 4]
            if self.lane_chunks:  # chunk t·steps + s of a tile at s·threads_k + t, zero weights past K
                t, kc = words.shape[:2]
                padded = np.full((t, self.steps * self.threads_k, 4), 0x88888888, np.uint32)
                padded[:, :kc] = words
                words = padded.reshape(t, self.threads_k, self.steps, 4).swapaxes(1, 2)
            return np.ascontiguousarray(words).reshape(-1), pack_scales_tiled(scales).reshape(-1)
        scales = np.asarray(scales, np.float32)
        return (pack_weights(q).reshape(-1),
                _half_words(scales) if self.scale_dtype == "half" else scales.reshape(-1))


# ---------------------------------------------------------------------------------------------------------------------
# Data: quantization as ET-VK's export does it, the packing, the reference
# ---------------------------------------------------------------------------------------------------------------------

def quantize_int4(w, group_size: int):
    """(q int8 [N, K] in -8..7, fp32 scales [N, K / group_size]) of a float weight [N, K]: torchao's symmetric
    int4 mapping per (1, group_size) block, as IntxWeightOnlyConfig(int4, PerGroup) quantizes ET-VK's linears."""
    import torch
    from torchao.quantization.quant_primitives import MappingType, choose_qparams_affine, quantize_affine
    weight = torch.as_tensor(w, dtype=torch.float32)
    block = (1, int(group_size))
    scale, zero = choose_qparams_affine(weight, MappingType.SYMMETRIC, block, torch.int8, quant_min=-8,
                                        quant_max=7, scale_dtype=torch.float32, zero_point_dtype=torch.int8)
    q = quantize_affine(weight, block, scale, zero, torch.int8, quant_min=-8, quant_max=7)
    return q, scale.reshape(weight.shape[0], -1).float()


def dequantize_int4(q, scales, group_size: int):
    """torchao's dequantize_affine of the int4 weight (zero points 0), fp32 as the shaders multiply, as float64."""
    import torch
    from torchao.quantization.quant_primitives import dequantize_affine
    s = torch.as_tensor(scales, dtype=torch.float32)
    return dequantize_affine(torch.as_tensor(q, dtype=torch.int8), (1, int(group_size)), s,
                             torch.zeros(s.shape, dtype=torch.int8), torch.int8, quant_min=-8, quant_max=7,
                             output_dtype=torch.float32).double()


def _as_dtype(a, dtype: str) -> np.ndarray:
    """fp32 values as the shader reads them: rounded through fp16 for "half"."""
    a = np.asarray(a, dtype=np.float32)
    return a.astype(np.float16).astype(np.float32) if dtype == "half" else a


def random_problem(spec: Q4GemvSpec, seed: int = 0):
    """(x [M, K] fp32, q int8 [N, K], scales fp32 [N, groups]) — a random weight quantized with `quantize_int4`; x
    and the scales already rounded to the spec's activation / scale dtypes."""
    import torch
    g = torch.Generator().manual_seed(seed)
    q, scales = quantize_int4(torch.randn((spec.n, spec.k), generator=g) * 0.05, spec.group_size)
    x = torch.randn((spec.m, spec.k), generator=g).numpy()
    return _as_dtype(x, spec.act_dtype), q.numpy(), _as_dtype(scales.numpy(), spec.scale_dtype)


def pack_weights(q) -> np.ndarray:
    """int4 q [N, K] (-8..7, K a multiple of 8) → uint32 [N, K / 8]: nibble i of word j = q[n, 8j + i] + 8."""
    q = np.asarray(q)
    n, k = q.shape
    if k % 8 or q.min(initial=0) < -8 or q.max(initial=0) > 7:
        raise ValueError(f"pack_weights: expected int4 values -8..7 with K a multiple of 8, got K={k}, values "
                         f"{q.min(initial=0)}..{q.max(initial=0)}")
    nibbles = (q.astype(np.int64) + 8).reshape(n, k // 8, 8)
    return (nibbles << (4 * np.arange(8))).sum(axis=-1).astype(np.uint32)


def _tiles(a, fill) -> np.ndarray:
    """[N, X] → [ceil(N / 4), X, 4]: rows padded to whole 4-row tiles with `fill`, a tile's 4 rows innermost."""
    a = np.asarray(a)
    pad = -a.shape[0] % 4
    if pad:
        a = np.concatenate([a, np.full((pad,) + a.shape[1:], fill, a.dtype)])
    return np.ascontiguousarray(a.reshape(-1, 4, *a.shape[1:]).swapaxes(1, 2))


def pack_weights_tiled(q) -> np.ndarray:
    """int4 q [N, K] → uint32 [ceil(N / 4), K / 8, 4]: word (t, c, r) = pack_weights' word c of row 4t + r (rows
    past N: zero weights)."""
    return _tiles(pack_weights(q), np.uint32(0x88888888))


def unpack_weights_tiled(words, n: int, k: int) -> np.ndarray:
    """pack_weights_tiled's inverse: uint32 [T, K / 8, 4] → int8 [N, K]."""
    rows = np.asarray(words, np.uint32).reshape(-1, k // 8, 4).swapaxes(1, 2).reshape(-1, k // 8)
    return unpack_weights(rows[:n], k)


def pack_scales_tiled(scales) -> np.ndarray:
    """fp32 scales [N, groups] → uint32 [ceil(N / 4), groups, 2]: the 4 rows' fp16 scales of a group (rows past N:
    0)."""
    return _tiles(np.asarray(scales, np.float32).astype(np.float16), np.float16(0)).view(np.uint32)


def unpack_weights(words, k: int) -> np.ndarray:
    """pack_weights' inverse: uint32 [N, K / 8] → int8 [N, K]."""
    words = np.asarray(words, dtype=np.uint32)
    nibbles = (words[..., None] >> (4 * np.arange(8, dtype=np.uint32))) & 0xF
    return (nibbles.reshape(words.shape[0], -1)[:, :k].astype(np.int16) - 8).astype(np.int8)


def reference(x, q, scales, group_size: int, fp16_rounding: float = 0.0):
    """(float64 x @ dequantize_int4(q, scales)ᵀ [M, N], the tolerance of any fp32 summation order plus
    `fp16_rounding` (a spec's relative bound of its fp16 arithmetic, `Q4GemvSpec.fp16_rounding`), both relative to
    max(|x| @ |w|ᵀ))."""
    import torch
    w = dequantize_int4(q, scales, group_size)
    x64 = torch.as_tensor(np.asarray(x), dtype=torch.float64)
    out = x64 @ w.T
    magnitude = float((x64.abs() @ w.abs().T).max()) if out.numel() else 0.0
    relative = (x64.shape[-1] + 2) * 2.0 ** -24 + fp16_rounding
    # fp16 results below the normal range round to 2^-25 absolutely: one per fp16 step of every chunk, at most
    absolute = (fp16_rounding > 0) * 16 * x64.shape[-1] * 2.0 ** -25
    return out.numpy(), relative * magnitude + absolute


def quantize_activations_int8(x):
    """(int8 x_q [M, K], fp32 scales [M], int32 zero points [M]) of fp32 x [M, K] as torchao's 8da4w quantizes
    activations (asymmetric int8 per token, zero points int8: ``choose_qparams_affine`` / ``quantize_affine``)."""
    import torch
    from torchao.quantization.quant_primitives import MappingType, choose_qparams_affine, quantize_affine
    x = torch.as_tensor(np.asarray(x, np.float32))
    block = (1, x.shape[-1])
    scale, zp = choose_qparams_affine(x, MappingType.ASYMMETRIC, block, torch.int8, quant_min=-128, quant_max=127,
                                      zero_point_dtype=torch.int8)
    q = quantize_affine(x, block, scale, zp, torch.int8, quant_min=-128, quant_max=127)
    return q.numpy(), scale.reshape(-1).float().numpy(), zp.reshape(-1).numpy().astype(np.int32)


def pack_activations_dq8(x_q) -> np.ndarray:
    """int8 x_q [M, K] → int32 [M, K / 8, 4] as the dq8 build reads a chunk of 8: its even values' bytes, its odd
    values' bytes (lane i = value 2i / 2i + 1), -8 · the chunk's sum (the weight's +8 bias, once per chunk), 0."""
    x = np.asarray(x_q, np.int64)
    m, k = x.shape
    chunks = x.reshape(m, k // 8, 8)
    shifts = 8 * np.arange(4)
    even = ((chunks[..., 0::2] & 0xFF) << shifts).sum(-1)
    odd = ((chunks[..., 1::2] & 0xFF) << shifts).sum(-1)
    packed = np.stack([even, odd, -8 * chunks.sum(-1), np.zeros_like(even)], axis=-1)
    return (packed & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def row_constants(q, scales, group_size: int) -> np.ndarray:
    """R[n] = Σ_g scale[n, g] · Σ_{k in g} q[n, k] (float64 → fp32): the dq8 build's zero-point term per row."""
    q = np.asarray(q, np.float64)
    n, k = q.shape
    sums = q.reshape(n, k // group_size, group_size).sum(-1)
    return (np.asarray(scales, np.float64) * sums).sum(-1).astype(np.float32)


def reference_dq8(x, q, scales, group_size: int, roundings: float | None = None):
    """(float64 8da4w output [M, N], tolerance): x quantized per token (`quantize_activations_int8`),
    ``(x_q - zp) · s @ dequantize_int4(q, scales)ᵀ`` as torchao's 8da4w computes it. The build's integer sums are
    exact; its fp32 sums over a thread's groups, the reduction and the zero-point term round:
    ``(K / 8 + 4) · 2⁻²⁴ · max s_x · (|x_q| @ |w|ᵀ + |zp| · Σ_k |w|)`` (`roundings` replaces K / 8 + 4: the
    tensor-core build rounds once per group and once per partial it adds, `mma_roundings`)."""
    import torch
    x_q, s_x, zp = quantize_activations_int8(x)
    w = dequantize_int4(q, scales, group_size)
    xq = torch.as_tensor(x_q, dtype=torch.float64)
    sx, z = torch.as_tensor(s_x, dtype=torch.float64)[:, None], torch.as_tensor(zp, dtype=torch.float64)[:, None]
    out = ((xq - z) * sx) @ w.T
    magnitude = (sx * (xq.abs() @ w.abs().T + z.abs() * w.abs().sum(-1)[None])).max() if out.numel() else 0.0
    roundings = xq.shape[-1] / 8 + 4 if roundings is None else roundings
    return out.numpy(), roundings * 2.0 ** -24 * float(magnitude)


def expected(spec: "Q4GemvSpec", x, q, scales):
    """(expected output, tolerance) of `spec` on (x, q, scales): `reference_dq8` for the int8-activation build, else
    `reference` with the spec's fp16 rounding."""
    if spec.dequant == "dq8":
        return reference_dq8(x, q, scales, spec.group_size)
    if spec.dequant == "mma":
        return reference_dq8(x, q, scales, spec.group_size, mma_roundings(spec.k, spec.group_size))
    return reference(x, q, scales, spec.group_size, spec.fp16_rounding)


# ---------------------------------------------------------------------------------------------------------------------
# The tensor-core build (dequant="mma"): its packing, its rounding bound, the device's matrix shapes
# ---------------------------------------------------------------------------------------------------------------------

def mma_roundings(k: int, group_size: int) -> float:
    """fp32 roundings on the tensor-core build's way to an output, at most: one multiply-add per group (its exact
    int32 sum times its scale), the sums of every subgroup's slots (≤ 16 subgroups x 16 slots), the zero-point term
    and the token's scale; the same bound for every build of a shape (the suite computes one reference a shape)."""
    return k // group_size + 16 * 16 + 8


def pack_weights_mma(q) -> np.ndarray:
    """int4 q [N, K] (-8..7, K a multiple of 32) → uint32 [ceil(N / 32), K / 32, 32, 4]: (t, s, r) = row 32t + r's
    4 words of K values 32s .. 32s + 31 (`pack_weights`' words 4s .. 4s + 3; rows past N: zero weights)."""
    q = np.asarray(q)
    n, k = q.shape
    if k % MMA_TK:
        raise ValueError(f"pack_weights_mma: expected K a multiple of {MMA_TK}, got K={k}")
    words = pack_weights(q)  # [N, K / 8]
    pad = -n % MMA_ROWS
    if pad:
        words = np.concatenate([words, np.full((pad, k // 8), 0x88888888, np.uint32)])
    return np.ascontiguousarray(words.reshape(-1, MMA_ROWS, k // MMA_TK, 4).swapaxes(1, 2))


def unpack_weights_mma(words, n: int, k: int) -> np.ndarray:
    """pack_weights_mma's inverse: uint32 [T, K / 32, 32, 4] → int8 [N, K]."""
    rows = np.asarray(words, np.uint32).reshape(-1, k // MMA_TK, MMA_ROWS, 4).swapaxes(1, 2).reshape(-1, k // 8)
    return unpack_weights(rows[:n], k)


def widen_mma(words) -> np.ndarray:
    """The shader's widening of a row's 4 words (uint32 [..., 4]) → its 32 staged int8 (16 · q, K in MMA_K_PERM
    order): per word (w ^ 0x88888888) << 4 & 0xF0F0F0F0, then (w ^ 0x88888888) & 0xF0F0F0F0, as bytes."""
    x = np.asarray(words, np.uint32) ^ np.uint32(0x88888888)
    lo = (x << np.uint32(4)) & np.uint32(0xF0F0F0F0)
    hi = x & np.uint32(0xF0F0F0F0)
    staged = np.stack([lo, hi], axis=-1).reshape(*x.shape[:-1], 8)
    return np.ascontiguousarray(staged).view(np.int8)


def _mma_columns(spec: "Q4GemvSpec"):
    """(slot, token) of each of the accumulator's mma_n columns, -1 for columns no slot uses."""
    j = np.arange(spec.mma_n)
    used = j < spec.slots * spec.m
    return np.where(used, j // spec.m, -1), np.where(used, j % spec.m, -1)


def pack_activations_mma(x_q, spec: "Q4GemvSpec") -> np.ndarray:
    """int8 x_q [M, K] → the B matrices, uint32 flat of int8 [K / 32, mma_n, 32]: step s's column j = slot · M + m
    holds token m's K values 32s + MMA_K_PERM where step s is in a group g with g % slots == slot, zeros elsewhere
    (and in columns past slots · M)."""
    x = np.asarray(x_q, np.int8)
    m, k = x.shape
    if (m, k) != (spec.m, spec.k):
        raise ValueError(f"pack_activations_mma: expected x_q of shape {(spec.m, spec.k)}, got {x.shape}")
    steps = k // MMA_TK
    chunks = x.reshape(m, steps, MMA_TK)[:, :, MMA_K_PERM]  # [M, steps, 32] in the staged K order
    out = np.zeros((steps, spec.mma_n, MMA_TK), np.int8)
    slot_of_step = (np.arange(steps) * MMA_TK // spec.group_size) % spec.slots
    slot, token = _mma_columns(spec)
    for j in range(spec.mma_n):
        if slot[j] < 0:
            continue
        hit = slot_of_step == slot[j]
        out[hit, j] = chunks[token[j], hit]
    return out.reshape(-1).view(np.uint32)


def pack_scales_mma(scales, spec: "Q4GemvSpec") -> np.ndarray:
    """fp32 scales [N, groups] → the scale tiles, uint32 flat of fp16 [ceil(N / 32), batches, 32, mma_n]: (t, b, r,
    j) = scale[32t + r, b · slots + slot(j)] (zeros past N, past the last group and in unused columns)."""
    s = np.asarray(scales, np.float32)
    n, groups = s.shape
    if (n, groups) != (spec.n, spec.groups):
        raise ValueError(f"pack_scales_mma: expected scales of shape {(spec.n, spec.groups)}, got {s.shape}")
    tiles, batches = math.ceil(n / MMA_ROWS), spec.batches
    padded = np.zeros((tiles * MMA_ROWS, batches * spec.slots), np.float16)
    padded[:n, :groups] = s.astype(np.float16)
    by_batch = padded.reshape(tiles, MMA_ROWS, batches, spec.slots).swapaxes(1, 2)  # [T, B, 32, slots]
    out = np.zeros((tiles, batches, MMA_ROWS, spec.mma_n), np.float16)
    slot, _ = _mma_columns(spec)
    for j in range(spec.mma_n):
        if slot[j] >= 0:
            out[..., j] = by_batch[..., slot[j]]
    return out.reshape(-1).view(np.uint32)


def mma_model(x_q, q, scales, spec: "Q4GemvSpec") -> np.ndarray:
    """The tensor-core build's integer and fp32 path on the host, from the packed buffers (float64 [M, N], before
    the token's scale and zero point): every batch's MMAs on the widened weights and the masked columns, each
    accumulator element times its scale tile's element, summed over batches and slots. Checks the packing, the
    widening and the slot bookkeeping against `reference_dq8` without a device."""
    tiles, steps = math.ceil(spec.n / MMA_ROWS), spec.k // MMA_TK
    a = widen_mma(pack_weights_mma(q)).astype(np.int64)  # [T, steps, 32 rows, 32]
    b = np.asarray(pack_activations_mma(x_q, spec)).view(np.int8).reshape(steps, spec.mma_n, MMA_TK)
    sc = np.asarray(pack_scales_mma(scales, spec)).view(np.float16).astype(np.float64)
    sc = sc.reshape(tiles, spec.batches, MMA_ROWS, spec.mma_n)
    acc = np.zeros((tiles, MMA_ROWS, spec.mma_n))
    for batch in range(spec.batches):
        lo, hi = batch * spec.batch_steps, min((batch + 1) * spec.batch_steps, steps)
        c = np.einsum("tsrk,sjk->trj", a[:, lo:hi], b[lo:hi].astype(np.int64))  # exact int32 sums
        acc += c * sc[:, batch]
    slot, token = _mma_columns(spec)
    out = np.zeros((spec.m, tiles * MMA_ROWS))
    for j in range(spec.mma_n):
        if slot[j] >= 0:
            out[token[j]] += acc[:, :, j].reshape(-1)
    return out[:, :spec.n] / 16


def mma_sizes(device) -> list[tuple[int, int, int]]:
    """(M, N, K) of the device's VK_KHR_cooperative_matrix entries int8 x int8 -> int32 (A, B, C, D) at subgroup
    scope; [] without the extension."""
    if not device.info.features.get("cooperative_matrix_khr"):
        return []
    return sorted({(e["M"], e["N"], e["K"]) for e in device.cooperative_matrix_properties()
                   if e["extension"] == "KHR" and (e["A"], e["B"], e["C"], e["D"]) == ("sint8", "sint8", "sint32",
                                                                                        "sint32")
                   and e["scope"] == 3})


def choose_mma_n(device, m: int = 1) -> int:
    """The MMA's N for `m` tokens from the device's list (`mma_sizes`): the smallest N in MMA_N of an entry 16 x N x
    32 with N ≥ m; ValueError naming the list where there is none."""
    sizes = mma_sizes(device)
    if not sizes:
        raise ValueError(f"q4_gemv: dequant='mma' {mma_unsupported_reason(device)}")
    for n in MMA_N:
        if n >= m and (MMA_TM, n, MMA_TK) in sizes:
            return n
    raise ValueError(f"q4_gemv: dequant='mma' needs an int8 cooperative matrix 16 x N x 32 with N in {MMA_N}, N >= "
                     f"{m}; {device.info.name} lists {sizes or 'none'}")


def mma_unsupported_reason(device, mma_n: int = 8) -> str | None:
    """None where the tensor-core build with N = `mma_n` can run on `device`; else why not, in one line (the KHR
    extension, int8 / fp16 shader types, a subgroup of 32, the listed 16 x N x 32 int8 shape and the int32 / fp32 /
    fp16 accumulators of 16 x N it converts between)."""
    f, name = device.info.features, device.info.name
    if not f.get("cooperative_matrix_khr"):
        why = getattr(device, "withheld", {}).get("cooperative_matrix_khr")
        return (f"needs VK_KHR_cooperative_matrix (int8 x int8 -> int32); {name} "
                + (f"has it {why}" if why else "does not offer it"))
    for feature in ("shader_int8", "shader_float16"):
        if not f.get(feature):
            return f"needs {feature} (the matrices' int8 / fp16 types); {name} lacks it"
    if device.info.subgroup_size != 32:
        return f"maps a subgroup's 32 lanes to a tile's 32 rows; {name} has {device.info.subgroup_size} lanes"
    entries = [e for e in device.cooperative_matrix_properties() if e["extension"] == "KHR" and e["scope"] == 3]
    if (MMA_TM, mma_n, MMA_TK) not in mma_sizes(device):
        return (f"needs an int8 x int8 -> int32 cooperative matrix of 16 x {mma_n} x 32; {name} lists "
                f"{mma_sizes(device) or 'none'}")
    for kind in ("float32", "float16"):  # the accumulators the scale epilogue converts to and loads
        if not any(kind in (e["C"], e["D"]) and (e["M"], e["N"]) == (MMA_TM, mma_n) for e in entries):
            return f"needs a {kind} accumulator of 16 x {mma_n} (the scale epilogue); {name} lists none"
    return None


#: The last problem the tensor-core build packed: (x, q, scales, geometry, buffers) — a cold rotation makes one run
#: per copy of the same arrays, and packing 58 M weights on the host takes seconds.
_MMA_LAST: list = []


def _mma_buffers(spec: "Q4GemvSpec", x, q, scales) -> tuple:
    """(masked activation columns, weight tiles, scale tiles, R[n], token scale / zero point pairs) of a problem as
    the tensor-core build reads them; the last problem's are reused when the same arrays come again."""
    geometry = (spec.n, spec.k, spec.group_size, spec.m, spec.mma_n)
    if _MMA_LAST and _MMA_LAST[0] is x and _MMA_LAST[1] is q and _MMA_LAST[2] is scales and _MMA_LAST[3] == geometry:
        return _MMA_LAST[4]
    x_q, s_x, zp = quantize_activations_int8(x)
    words, scale_words = spec.pack(q, scales)
    buffers = (pack_activations_mma(x_q, spec), words, scale_words, row_constants(q, scales, spec.group_size),
               np.stack([s_x, zp.astype(np.float32)], -1).reshape(-1))
    _MMA_LAST[:] = [x, q, scales, geometry, buffers]
    return buffers


def _half_words(a) -> np.ndarray:
    """fp32 values as fp16 pairs in uint32 words (zero-padded to even), as the shader's unpackHalf2x16 reads them."""
    h = np.asarray(a, dtype=np.float32).astype(np.float16).reshape(-1)
    if h.size % 2:
        h = np.append(h, np.float16(0))
    return h.view(np.uint32)


class Q4GemvRun(KernelRun):
    """The GEMV on a device with its data: x [M, K], q [N, K], scales [N, groups] (None: `random_problem`)."""

    def __init__(self, device, spec: Q4GemvSpec, x=None, q=None, scales=None, seed: int = 0):
        super().__init__(device)
        spec.check_device(device)
        self.spec = spec
        if x is None or q is None or scales is None:
            x, q, scales = random_problem(spec, seed)
        x, scales = np.asarray(x, np.float32), np.asarray(scales, np.float32)
        for name, a, shape in (("x", x, (spec.m, spec.k)), ("q", np.asarray(q), (spec.n, spec.k)),
                               ("scales", scales, (spec.n, spec.groups))):
            if a.shape != shape:
                raise ValueError(f"q4_gemv: {name} must be {shape} for this spec, got {a.shape}")
        try:
            self.extra = []
            if spec.dequant == "mma":
                packed = _mma_buffers(spec, x, q, scales)
                self.x, self.w, self.s, r, xqp = (self._own(device.buffer(a, name=f"q4gemv-{name}")) for name, a in
                                                  zip(("xq", "w", "scales", "r", "xqp"), packed))
                self.extra = [r, xqp]
                self.out = self._own(device.buffer(nbytes=4 * spec.m * spec.n, name="q4gemv-out"))
                return
            if spec.dequant == "dq8":  # the activations quantized per token, as the op before the GEMV would
                x_q, s_x, zp = quantize_activations_int8(x)
                self.x = self._own(device.buffer(pack_activations_dq8(x_q).reshape(-1), name="q4gemv-xq"))
                self.extra = [self._own(device.buffer(row_constants(q, scales, spec.group_size), name="q4gemv-r")),
                              self._own(device.buffer(np.stack([s_x, zp.astype(np.float32)], -1).reshape(-1),
                                                      name="q4gemv-xqp"))]
            else:
                self.x = self._own(device.buffer(_half_words(x) if spec.act_dtype == "half" else x.reshape(-1),
                                                 name="q4gemv-x"))
            words, scale_words = spec.pack(q, scales)
            self.w = self._own(device.buffer(words, name="q4gemv-w"))
            self.s = self._own(device.buffer(scale_words, name="q4gemv-scales"))
            self.out = self._own(device.buffer(nbytes=4 * spec.m * spec.n, name="q4gemv-out"))
        except Exception:
            self.close()
            raise

    def resources(self) -> list:
        return [self.out, self.x, self.w, self.s, *self.extra]

    def record(self, rec, label: str | None = None):
        self._dispatch(rec, self.spec, self.resources(), label or self.spec.variant)

    def output(self) -> np.ndarray:
        return self.out.download(np.float32).reshape(self.spec.m, self.spec.n)


def compare(got, expected, tolerance: float) -> dict:
    """max_abs_diff, tolerance, correct of an output against `reference`'s (expected, tolerance)."""
    diff = float(np.abs(np.asarray(got, np.float64) - expected).max())
    return {"max_abs_diff": diff, "tolerance": tolerance, "correct": bool(np.isfinite(diff) and diff <= tolerance)}


def check(device, spec: Q4GemvSpec, seed: int = 0) -> dict:
    """Run `spec` once on random data and compare with the float64 reference: max_abs_diff, tolerance, correct."""
    x, q, scales = random_problem(spec, seed)
    with Q4GemvRun(device, spec, x, q, scales) as run:
        run.run()
        got = run.output()
    return compare(got, *expected(spec, x, q, scales))
