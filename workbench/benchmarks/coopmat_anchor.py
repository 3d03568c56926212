"""`workbench bench coopmat-anchor` / `coopmat-beyond`: NVIDIA's own Vulkan cooperative-matrix benchmark
(jeffbolznv/vk_cooperative_matrix_perf, a checkout the user names: third-party, never in this repository) measured with
the workbench's method beside the workbench's int8 GEMM and conv, and the operand-load steps beyond it.

    WORKBENCH_COOPMAT_PERF=/path/to/vk_cooperative_matrix_perf workbench bench coopmat-anchor
    python -m workbench.benchmarks.coopmat_anchor --sample DIR [--out DIR] [--quick] [--beyond]

The anchor (`coopmat_anchor.csv`, `anchor_suite`): the sample's `shaders/shmem.comp` (subgroup-scope matrices,
8 subgroups, A and B staged through padded shared memory, next tile prefetched into registers) and
`shaders/workgroup.comp` (VK_NV_cooperative_matrix2 workgroup-scope matrices, tensor-layout loads), compiled from the
checkout by the workbench's glslang with the defines of the sample's own `shaders/compile.bat` (int8 -> int32 and
fp16 -> fp16 / fp32), every tiling the sample's host program (src/vk_cooperative_matrix_perf.cpp) would run on the
device: for each subgroup-scope VkCooperativeMatrixPropertiesKHR entry (shmem) and each workgroup-scope flexible-
dimension entry of 256 or 128 invocations (workgroup), TILE_M x TILE_N in {128, 256}^2, B row- and column-major,
TILE_K 64 for 8-bit inputs / 32 for fp16 -> fp16 / 16 otherwise, without 256 x 256 for 32-bit results. Its
specialization constants (0..21: fragment size, tile, K, strides, alpha = 2, beta = 3, B's layout, staged rows,
invocations, M, N, subgroup size) are the host program's. Timed per dispatch with Vulkan timestamps (`measure`:
warm clock, repeats per submit, a stable sample set), the SM clock read per row; each row is checked against a host
product on a band of rows (D = 2·A·B + 3·C; int exact, fp16 within its rounding). The workbench's GEMM (int32 out)
and conv (int8 out) of `kernels.coopmat_conv` run at the same M, N, K in the same run: the staged kernel, and the
workgroup-scope kernel where the device runs VK_NV_cooperative_matrix2 (impl "… (workgroup scope)").

What differs from the sample, on purpose: its buffer-device-address parameter block (a uniform buffer of four
addresses) becomes four storage-buffer descriptors (`descriptor_source`; the workbench's runtime binds descriptors,
and the loads are the same uvec4 / tensor loads); it times with the host clock around 10 dispatches after 2-5 warm-up
submits, this with timestamps after the clock is up.

Beyond it (`coopmat_beyond.csv`, `beyond_suite`): the workbench's kernel with one operand-load option changed per
row (`step` column): padding of the staged rows, contiguous chunks per thread, the fragment prefetch, deeper register
pipelines, larger K tiles, the VK_NV_cooperative_matrix2 workgroup-scope kernel (only where the device lists it),
and each new kernel's diagnostic builds (MMAs only, MMAs without the store) for the strict roofline check.
"""
from __future__ import annotations

import math
import os
import re
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..kernels import coopmat as CM
from ..kernels import coopmat_conv as CC
from ..measure import Rows, environment, keep_busy, measurement_row, sample_recording
from ..measure.clocks import ClockSampler

ENV = "WORKBENCH_COOPMAT_PERF"
# the GEMM shapes: 4096^3, 8192^3, and the pointwise convs 5x512x128x128->512 and 9x256x128x128->256 as GEMMs
CONV_SHAPES = {"4096^3": (1, 4096, 4096, 64, 64), "8192^3": (1, 8192, 8192, 128, 64),
               "5x512": (5, 512, 512, 128, 128), "9x256": (9, 256, 256, 128, 128)}
TYPES = {"s8_s32": ("int8_t", "int32_t", 8), "fp16_fp16": ("float16_t", "float16_t", 16),
         "fp16_fp32": ("float16_t", "float32_t", 16)}
COMPONENT = {"s8_s32": ("sint8", "sint32"), "fp16_fp16": ("float16", "float16"), "fp16_fp32": ("float16", "float32")}
ALPHA, BETA = 2.0, 3.0  # the host program's
SUBGROUP_SCOPE, WORKGROUP_SCOPE = 3, 2
WORKGROUP_INVOCATIONS = (256, 128)  # the host program's workgroupSizesToTest
FP16_SHAPES = ("4096^3", "8192^3", "256^3")  # fp16 is the reference figure at the cube shapes only
CHECK_ROWS = 256  # rows of D checked per row of the table: every row position of a tile, tiles spread over M
COOP = (16, 16, 32)
BEST_TILE = {"wm": 2, "wn": 2, "rm": 4, "rn": 4, "ksteps": 1, "stages": 3}  # coopmat_steps.csv's best


class SampleError(ValueError):
    """The sample's folder is missing or is not vk_cooperative_matrix_perf (one line)."""


# ------------------------------------------------------------------------------------------------------------------
# The sample: where, which shaders, which tilings
# ------------------------------------------------------------------------------------------------------------------

def sample_dir(path=None) -> Path:
    """The checkout: `path`, else $WORKBENCH_COOPMAT_PERF; SampleError naming what is missing."""
    given = path if path is not None else os.environ.get(ENV)
    if not given:
        raise _no_sample()
    root = Path(given).expanduser()
    if not root.is_dir():
        raise SampleError(f"vk_cooperative_matrix_perf checkout {str(root)!r} is not a folder")
    missing = [f for f in ("shaders/shmem.comp", "shaders/workgroup.comp", "shaders/compile.bat")
               if not (root / f).is_file()]
    if missing:
        raise SampleError(f"{root} is not a vk_cooperative_matrix_perf checkout: expected {', '.join(missing)}")
    return root


def _no_sample() -> SampleError:
    return SampleError(f"no vk_cooperative_matrix_perf checkout: pass --sample DIR or set {ENV} (clone "
                       f"https://github.com/jeffbolznv/vk_cooperative_matrix_perf outside the repository)")


@dataclass(frozen=True)
class SampleShader:
    """One shader the sample builds: `kind` "shmem" / "workgroup", `types` a key of TYPES, its defines."""
    kind: str
    types: str
    source: Path
    defines: tuple

    @property
    def name(self) -> str:  # the sample's own .spv name
        return f"{self.kind}{self.types}"


def discover(root) -> list[SampleShader]:
    """The int8 -> int32 and fp16 shaders `shaders/compile.bat` builds (its -D defines, its .comp sources)."""
    root = Path(root)
    out = []
    for line in (root / "shaders" / "compile.bat").read_text().splitlines():
        m = re.search(r"-V\s+(\w+)\.comp\s+-o\s+(\w+)\.spv", line)
        if not m:
            continue
        kind, spv = m.groups()
        types = spv[len(kind):]
        if kind not in ("shmem", "workgroup") or types not in TYPES:
            continue
        defines = tuple(re.findall(r"-D(\w+)=(\w+)", line))
        out.append(SampleShader(kind, types, root / "shaders" / f"{kind}.comp", defines))
    if not out:
        raise SampleError(f"{root}/shaders/compile.bat builds no shmem / workgroup s8_s32 or fp16 shader")
    return out


# the sample's parameter block: four buffer references in a uniform buffer -> four storage buffers
_REFS = (("InputAV4", "inputAV4", 1), ("InputBV4", "inputBV4", 2), ("InputC", "inputC", 3), ("Output", "outputO", 0))


def descriptor_source(text: str) -> str:
    """The sample's shader with its buffer references as storage-buffer descriptors: D at binding 0, A, B, C at
    1, 2, 3 (same block types, same element loads). SampleError where the text is not the shape expected."""
    for block, instance, binding in _REFS:
        pattern = rf"layout\(buffer_reference\)\s*buffer\s+{block}\s*(\{{[^}}]*\}})\s*{instance}\s*;"
        text, n = re.subn(pattern, rf"layout(set=0, binding={binding}, std430) buffer {block} \1 {instance};", text)
        local, k = re.subn(rf"\n\s*{block}\s+{instance}\s*=\s*params\.{instance}\s*;", "\n", text)
        if n != 1 or k != 1:
            raise SampleError(f"the sample's shader no longer declares {block} {instance} as a buffer reference read "
                              f"from params (found {n} declarations, {k} reads): update descriptor_source")
        text = local
    text, n = re.subn(r"layout\(set\s*=\s*0,\s*binding\s*=\s*0,\s*std430\)\s*uniform\s+Params\s*\{[^}]*\}\s*params;",
                      "", text)
    text = text.replace("#extension GL_EXT_buffer_reference : enable\n", "")
    if n != 1:
        raise SampleError("the sample's shader has no `uniform Params { ... } params;` block to replace")
    return text


def compile_sample(shader: SampleShader):
    """SPIR-V of `shader` through the workbench's toolchain (glslang, spirv-val), cached."""
    from ..toolchain.shaders import compile_glsl
    return compile_glsl(descriptor_source(shader.source.read_text()), name=shader.name, defines=dict(shader.defines),
                        target_env="vulkan1.3")


@dataclass(frozen=True)
class Variant:
    """One tiling the sample's host program runs: its shader, fragment (lM, lN, lK), tile, B's layout, invocations."""
    shader: SampleShader
    fragment: tuple
    tile: tuple
    b_col_major: bool
    invocations: int

    @property
    def tiling(self) -> str:
        return (f"{self.fragment[0]}x{self.fragment[1]}x{self.fragment[2]} tile {self.tile[0]}x{self.tile[1]}x"
                f"{self.tile[2]} B {'col' if self.b_col_major else 'row'}-major {self.invocations} threads")

    @property
    def impl(self) -> str:
        return f"sample {self.shader.name}"

    def gemm(self, m: int, n: int, k: int) -> tuple[int, int, int]:
        """M, N, K rounded up to whole tiles, as the host program does."""
        tm, tn, tk = self.tile
        return -(-m // tm) * tm, -(-n // tn) * tn, -(-k // tk) * tk

    def spec_constants(self, m: int, n: int, k: int, subgroup: int = 32) -> dict:
        """The host program's specData (ids 0..21) for an M x N x K multiply (already whole tiles)."""
        lm, ln, lk = self.fragment
        tm, tn, tk = self.tile
        bc = self.b_col_major
        return {0: lm, 1: ln, 2: lk, 3: tm, 4: tn, 5: tk, 6: k, 7: k, 8: k if bc else n, 9: n, 10: n,
                11: ALPHA, 12: BETA, 13: bc, 14: tk, 15: tm, 16: tk if bc else tn, 17: tn if bc else tk,
                18: self.invocations, 19: m, 20: n, 21: subgroup}


def _tile_k(types: str) -> int:
    a_bits = TYPES[types][2]
    return 64 if a_bits == 8 else 32 if types == "fp16_fp16" else 16


def variants(shaders, props, flexible=(), subgroup: int = 32) -> list[Variant]:
    """Every tiling the sample would run here: `props` VkCooperativeMatrixPropertiesKHR entries (dicts as
    `kernels.coopmat.properties` lists them: extension, M, N, K, A, B, C, D, scope) for the shmem shaders,
    `flexible` the VK_NV_cooperative_matrix2 flexible-dimension entries (+ invocations) for the workgroup ones."""
    by_key = {(s.kind, s.types): s for s in shaders}
    out, seen = [], set()
    entries = [("shmem", e) for e in props if e.get("extension", "KHR") == "KHR" and e["scope"] == SUBGROUP_SCOPE]
    entries += [("workgroup", e) for e in flexible
                if e["scope"] == WORKGROUP_SCOPE and e.get("invocations") in WORKGROUP_INVOCATIONS]
    for kind, e in entries:
        types = next((t for t, (a, c) in COMPONENT.items() if (e["A"], e["B"], e["C"], e["D"]) == (a, a, c, c)),
                     None)
        shader = by_key.get((kind, types))
        if shader is None:
            continue
        a_bits = TYPES[types][2]
        invocations = e["invocations"] if kind == "workgroup" else 8 * subgroup
        tk = _tile_k(types)
        if kind == "workgroup" and tk < e["K"]:
            continue
        for tm in (128, 256):
            for tn in (128, 256):
                if COMPONENT[types][1].endswith("32") and tm == tn == 256:
                    continue  # "too slow and may TDR" (the host program)
                for bc in (False, True):
                    # shmem: each fragment load must start on 16 bytes (the host program's alignment skip)
                    if kind == "shmem" and (a_bits * e["K"] % 128 or a_bits * (e["K"] if bc else e["N"]) % 128):
                        continue
                    v = Variant(shader, (e["M"], e["N"], e["K"]), (tm, tn, tk), bc, invocations)
                    if (v.shader.name, v.fragment, v.tile, bc, invocations) not in seen:
                        seen.add((v.shader.name, v.fragment, v.tile, bc, invocations))
                        out.append(v)
    return out


def unsupported_reason(device) -> str | None:
    """None where the sample's shaders can run; else one line why not."""
    f = device.info.features
    if not f.get("cooperative_matrix_khr"):
        why = CM.unsupported_reason(device) if not f.get("cooperative_matrix_nv") else \
            device.withheld.get("cooperative_matrix_khr", "VK_KHR_cooperative_matrix is not exposed")
        return f"vk_cooperative_matrix_perf needs VK_KHR_cooperative_matrix: {why}"
    return None


# ------------------------------------------------------------------------------------------------------------------
# Running one tiling
# ------------------------------------------------------------------------------------------------------------------

def operands(types: str, m: int, n: int, k: int, b_col_major: bool, seed: int = 0):
    """A (M x K), B (K x N, or N x K column-major), C (M x N) as the host program fills them: ints in [-128, 128),
    floats in {-0.5, 0, 0.5, 1}."""
    rng = np.random.default_rng(seed)
    b_shape = (n, k) if b_col_major else (k, n)
    if types == "s8_s32":
        return (rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, b_shape, dtype=np.int8),
                rng.integers(-128, 128, (m, n), dtype=np.int32))
    ftype = np.float16 if types.endswith("fp16") else np.float32
    pick = lambda shape, dtype: ((rng.integers(0, 4, shape) - 1) / 2).astype(dtype)  # noqa: E731
    return pick((m, k), np.float16), pick(b_shape, np.float16), pick((m, n), ftype)


def check_rows(m: int, tile_m: int, count: int = CHECK_ROWS) -> np.ndarray:
    """Rows of D to check: every row position inside a tile is covered, spread over the tile rows of M."""
    count = min(count, m)
    i = np.arange(count)
    rows = (i * (m // tile_m) // count) * tile_m + i % tile_m  # tile row i·T/count, position i mod TILE_M
    rows = rows[rows < m]
    return np.unique(np.concatenate([rows, [0, m - 1]]))


def check(types: str, a, b, c, d, rows, b_col_major: bool) -> tuple[bool, float]:
    """(correct, max error) of D's `rows` against alpha·A·B + beta·C on the host: exact for ints (wrapped to int32),
    for floats within the accumulator's rounding (half an ulp of |D| per add, K adds, bounded)."""
    bm = b.T if b_col_major else b
    ref = ALPHA * (a[rows].astype(np.float64) @ bm.astype(np.float64)) + BETA * c[rows].astype(np.float64)
    got = d[rows].astype(np.float64)
    if types == "s8_s32":
        ref = ((ref.astype(np.int64) + 2**31) % 2**32) - 2**31
        err = float(np.abs(got - ref).max())
        return err == 0, err
    eps = 2.0 ** -10 if types.endswith("fp16") else 2.0 ** -23
    tol = eps * a.shape[1] * max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(got - ref).max())
    return bool(np.isfinite(err) and err <= tol), err


class Problem:
    """The operands of one (types, M, N, K, B layout) on the host and the device, shared by the tilings that run on
    it (`get` makes a new one only when the key changes; `close` frees the device buffers)."""

    def __init__(self, device):
        self.device, self.key, self.buffers = device, None, ()

    def get(self, types: str, m: int, n: int, k: int, b_col_major: bool, seed: int = 0):
        key = (types, m, n, k, b_col_major)
        if key != self.key:
            self.close()
            self.a, self.b, self.c = operands(types, m, n, k, b_col_major, seed)
            d = self.device.buffer(nbytes=m * n * self.c.dtype.itemsize, name="sample D")
            self.buffers = (d, self.device.buffer(self.a, name="sample A"), self.device.buffer(self.b, name="sample B"),
                            self.device.buffer(self.c, name="sample C"))
            self.key = key
        return self

    def close(self):
        for buf in reversed(self.buffers):
            buf.close()
        self.key, self.buffers = None, ()


def run_variant(device, variant: Variant, m: int, n: int, k: int, *, min_time_s: float = 0.2, warm_s: float = 1.0,
                problem: Problem | None = None) -> dict:
    """One tiling at M x N x K (rounded to whole tiles) through the launch path; the row's measured columns.
    `problem`: operands kept across tilings (else made and freed here)."""
    from ..vk.launch import Launch, Launches
    m, n, k = variant.gemm(m, n, k)
    types = variant.shader.types
    own = problem is None
    problem = (Problem(device) if own else problem).get(types, m, n, k, variant.b_col_major)
    a, b, c = problem.a, problem.b, problem.c
    out_dtype = c.dtype
    spirv = compile_sample(variant.shader)
    dbuf, abuf, bbuf, cbuf = problem.buffers
    try:
        dbuf.upload(np.full(m * n, 1234, out_dtype))  # the host program's marker: a tiling that skips D shows
        launch = Launch(spirv, {0: dbuf, 1: abuf, 2: bbuf, 3: cbuf}, groups=(n // variant.tile[1],
                                                                             m // variant.tile[0], 1),
                        spec_constants=variant.spec_constants(m, n, k, device.info.subgroup_size),
                        local_size=(variant.invocations, 1, 1), name=variant.shader.name, label=variant.tiling)
        with Launches(device, [launch]) as launches:
            probe = launches.run("probe")[0].gpu_ns or 1.0
            repeats = int(min(100, max(1, 20e6 // probe)))  # ~20 ms a submit
            with device.record(variant.impl) as rec:
                for _ in range(repeats):
                    launches.record(rec)
                keep_busy(rec, device, warm_s)
                with ClockSampler(device) as clocks:
                    gpu, host = sample_recording(rec, repeats=repeats, min_time_s=min_time_s)
        d = dbuf.download(out_dtype).reshape(m, n)
    finally:
        if own:
            problem.close()
    ok, err = check(types, a, b, c, d, check_rows(m, variant.tile[0]), variant.b_col_major)
    bytes_moved = a.nbytes + b.nbytes + c.nbytes + d.nbytes
    return {"gpu": gpu, "host": host, "gemm": (m, n, k), "repeats": repeats, "correct": ok, "max_abs_diff": err,
            "bytes": bytes_moved, "clocks": clocks.columns()}


#: The workgroup-scope kernel's best block on the H200 (coopmat_beyond.csv, step 6): 128 x 128 x 64, 128 threads.
WG_BEST = {"block": (128, 128, 64), "threads": 128}


def _workbench_specs(shape, device=None):
    """The workbench's GEMM (int32 out) and conv (int8 out): the staged kernel at the best tile of
    coopmat_steps.csv and, where `device` runs VK_NV_cooperative_matrix2's int8 workgroup-scope matrices, the
    workgroup-scope kernel at its best block (so the anchor and both kernels share one run)."""
    specs = [("workbench gemm", CC.CoopmatConvSpec(shape, COOP, epilogue="int32", **BEST_TILE)),
             ("workbench conv", CC.CoopmatConvSpec(shape, COOP, epilogue="sectors", **BEST_TILE))]
    if device is not None:
        wg = [("workbench gemm (workgroup scope)", CC.WorkgroupGemmSpec(tuple(shape), epilogue="int32", **WG_BEST)),
              ("workbench conv (workgroup scope)", CC.WorkgroupGemmSpec(tuple(shape), epilogue="int8", **WG_BEST))]
        specs += [(impl, spec) for impl, spec in wg if CC.workgroup_reason(device, spec) is None]
    return specs


def _problem(shape):
    nb, cin, cout, h, w = shape
    rng = np.random.default_rng(0)
    base = (rng.integers(-128, 128, (nb * h * w, cin), dtype=np.int8),
            rng.integers(-128, 128, (cin, cout), dtype=np.int8))
    expected = CM.gemm_reference(*base)
    return base, expected, CC.int8_reference(expected, np.ascontiguousarray(base[1].T))


def run_workbench(device, spec, problem, *, min_time_s: float, warm_s: float = 1.0) -> dict:
    """One of the workbench's kernels (`CC.run`) on the shape's shared random problem, with a warm clock."""
    base, expected, int8_ref = problem
    a, bt = CM.gemm_operands(spec, base=base)

    def busy(rec, repeats):
        keep_busy(rec, device, warm_s)
        return np.ones(1), np.ones(1)
    if not device.info.is_cpu:
        CC.run(device, spec, a, bt, expected=expected, sample=busy, reference=np.zeros((1, 1), np.int8))
    with ClockSampler(device) as clocks:
        (gpu, host), err, repeats = CC.run(device, spec, a, bt, expected=expected, reference=int8_ref,
                                           sample=lambda rec, r: sample_recording(rec, repeats=r,
                                                                                  min_time_s=min_time_s))
    return {"gpu": gpu, "host": host, "gemm": spec.gemm, "repeats": repeats,
            "correct": None if spec.diagnostic else err == 0, "max_abs_diff": err, "bytes": spec.bytes_moved(),
            "clocks": clocks.columns()}


def _past(deadline, rows, kernel, env) -> bool:
    """True (and a row saying so) once time.monotonic() is past `deadline`."""
    if deadline is None or time.monotonic() < deadline:
        return False
    rows.append({"kernel": kernel, "status": "stopped: the run's time budget is spent", **env})
    return True


def _row(kernel, env, r, *, macs, impl, shape, tiling, **cols) -> dict:
    m, n, k = r["gemm"]
    row = measurement_row(kernel, env, r["gpu"], host_ns=r["host"], bytes_moved=r["bytes"], macs=macs, impl=impl,
                          shape=shape, M=m, N=n, K=k, tiling=tiling, correct=r["correct"],
                          max_abs_diff=r["max_abs_diff"], repeats=r["repeats"], **cols)
    row.update(r["clocks"])
    row["TOP/s"] = row["GOP/s"] / 1e3
    row["clock_mhz"] = row.get("sm_clock_mhz_median", math.nan)
    return row


# ------------------------------------------------------------------------------------------------------------------
# The suites
# ------------------------------------------------------------------------------------------------------------------

def _shapes(quick: bool, shapes):
    if shapes is not None:
        return dict(shapes)
    return {"256^3": (1, 256, 256, 16, 16)} if quick else CONV_SHAPES


def anchor_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, sample=None,
                 shapes=None, min_time_s: float | None = None, fp16_shapes=FP16_SHAPES,
                 deadline: float | None = None) -> pd.DataFrame:
    """The anchor table (module docstring). `sample`: the checkout (default $WORKBENCH_COOPMAT_PERF); `shapes`:
    {label: conv shape (N, Cin, Cout, H, W)}, GEMM M = N·H·W, N = Cout, K = Cin; the fp16 shaders run at the
    labels of `fp16_shapes` only (None: every shape). `deadline` (time.monotonic()): no new row after it, a row
    says where it stopped."""
    rows = Rows(writer)
    env = environment(device)
    if sample is None and not os.environ.get(ENV):  # not asked for (the main job runs every suite): a row says why
        rows.append({"kernel": "coopmat anchor", "status": "skipped", "reason": str(_no_sample()), **env})
        return pd.DataFrame(rows)
    shaders = discover(sample_dir(sample))
    reason = unsupported_reason(device)
    if reason:
        rows.append({"kernel": "coopmat anchor", "status": "skipped", "reason": reason, **env})
        return pd.DataFrame(rows)
    props = CM.properties(device).to_dict("records")
    flexible = device.cooperative_matrix_flexible_properties()
    found = variants(shaders, props, flexible, device.info.subgroup_size)
    min_time_s = min_time_s if min_time_s is not None else (0.02 if quick else 0.2)
    warm_s = 0.0 if quick else 1.0
    t0 = time.perf_counter()

    def say(text):
        if show_progress:
            print(f"[coopmat-anchor {time.perf_counter() - t0:6.1f} s] {text}", flush=True)
    say(f"{len(found)} tilings of {len({v.shader.name for v in found})} shaders; workgroup scope: "
        f"{len(flexible)} flexible entries")
    problem = Problem(device)
    for label, shape in _shapes(quick, shapes).items():
        nb, cin, cout, h, w = shape
        m, n, k = nb * h * w, cout, cin
        here = [v for v in found if v.shader.types == "s8_s32" or fp16_shapes is None or label in fp16_shapes]
        # int8 (the figure) before fp16; one upload per operand set
        here.sort(key=lambda v: (v.shader.types != "s8_s32", v.shader.types, v.b_col_major))
        for v in here:
            if _past(deadline, rows, "coopmat anchor", env):
                problem.close()
                return pd.DataFrame(rows)
            try:
                r = run_variant(device, v, m, n, k, min_time_s=min_time_s, warm_s=warm_s, problem=problem)
                row = _row("coopmat anchor", env, r, macs=int(np.prod(r["gemm"])), impl=v.impl, shape=label,
                           tiling=v.tiling, types=v.shader.types, scope=v.shader.kind, invocations=v.invocations,
                           status="ok" if r["correct"] else "WRONG")
            except Exception as exc:  # noqa: BLE001 - one failing tiling must not end the run
                row = {"kernel": "coopmat anchor", "impl": v.impl, "shape": label, "tiling": v.tiling,
                       "status": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}", **env}
            rows.append(row)
            say(f"{label} {v.impl} {v.tiling}: {row.get('TOP/s', math.nan):,.1f} TOP/s {row['status']}")
        problem.close()
        wb_problem = _problem(shape)
        for impl, spec in _workbench_specs(shape, device):
            if _past(deadline, rows, "coopmat anchor", env):
                return pd.DataFrame(rows)
            try:
                r = run_workbench(device, spec, wb_problem, min_time_s=min_time_s, warm_s=warm_s)
                row = _row("coopmat anchor", env, r, macs=spec.macs(), impl=impl, shape=label, tiling=spec.label,
                           types="s8_s32" if "gemm" in impl else "s8_s8 (conv)",
                           scope="workgroup" if isinstance(spec, CC.WorkgroupGemmSpec) else "subgroup",
                           invocations=spec.threads_per_group(), status="ok" if r["correct"] else "WRONG")
            except Exception as exc:  # noqa: BLE001
                row = {"kernel": "coopmat anchor", "impl": impl, "shape": label, "tiling": spec.label,
                       "status": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}", **env}
            rows.append(row)
            say(f"{label} {impl}: {row.get('TOP/s', math.nan):,.1f} TOP/s {row['status']}")
    return pd.DataFrame(rows)


def beyond_configs(shape) -> list[tuple[str, object]]:
    """(step, spec): the landed best, then one operand-load option at a time, then the diagnostic builds."""
    new = lambda **kw: CC.CoopmatConvSpec(tuple(shape), COOP, **{**BEST_TILE, **kw})  # noqa: E731
    out = [("0 landed", new(epilogue="int32")), ("0 landed", new(epilogue="sectors"))]
    out += [("1 pad", new(epilogue=e, pad=p)) for p in (1, 2, 3) for e in ("int32", "sectors")]
    out += [("2 vec", new(epilogue="sectors", pad=1, vec=2)),
            ("2 vec", new(epilogue="sectors", pad=1, vec=4, ksteps=2))]
    out += [("3 k tile", new(epilogue=e, pad=1, ksteps=ks)) for ks in (2, 4) for e in ("int32", "sectors")]
    out += [("4 frag prefetch", new(epilogue=e, pad=1, ksteps=ks, frags=2)) for ks in (2, 4)
            for e in ("int32", "sectors")]
    out += [("5 register pipeline", new(epilogue="sectors", pad=1, ksteps=2, frags=2, stages=s)) for s in (2, 4)]
    out += [("6 workgroup scope", CC.WorkgroupGemmSpec(tuple(shape), block, threads, epilogue))
            for block, threads in (((256, 128, 64), 256), ((128, 128, 64), 128), ((128, 256, 64), 256))
            for epilogue in ("int32", "int8")]
    out += [("7 diagnostic", new(epilogue="sectors", pad=1, ksteps=2, frags=2, diagnostic=d)) for d in (2, 3)]
    out += [("7 diagnostic", CC.WorkgroupGemmSpec(tuple(shape), diagnostic=d)) for d in (2, 3)]
    return out


def beyond_suite(device, writer=None, *, quick: bool = False, show_progress: bool = True, shapes=None,
                 min_time_s: float | None = None, deadline: float | None = None, steps=None) -> pd.DataFrame:
    """The steps table (module docstring); a config the device cannot run is a row saying why. `shapes` default:
    4096^3 and the two conv shapes; `deadline` as for `anchor_suite`; `steps`: the step numbers to run (strings,
    e.g. ("0", "6", "7"); default all)."""
    rows = Rows(writer)
    env = environment(device)
    reason = CM.unsupported_reason(device)
    if reason:
        rows.append({"kernel": "coopmat beyond", "status": "skipped", "reason": reason, **env})
        return pd.DataFrame(rows)
    min_time_s = min_time_s if min_time_s is not None else (0.02 if quick else 0.2)
    warm_s = 0.0 if quick else 1.0
    smem = device.info.shared_memory_bytes
    t0 = time.perf_counter()
    shapes = shapes if shapes is not None or quick else {k: v for k, v in CONV_SHAPES.items() if k != "8192^3"}
    for label, shape in _shapes(quick, shapes).items():
        problem = _problem(shape)
        for step, spec in beyond_configs(shape):
            if steps is not None and step.split()[0] not in steps:
                continue
            if _past(deadline, rows, "coopmat beyond", env):
                return pd.DataFrame(rows)
            base = {"kernel": "coopmat beyond", "impl": "workbench " + ("conv" if spec.requant else "gemm"),
                    "shape": label, "step": step, "tiling": spec.label, "diagnostic": spec.diagnostic, **env}
            why = (CC.workgroup_reason(device, spec) if isinstance(spec, CC.WorkgroupGemmSpec)
                   else f"needs {spec.shared_bytes()} B of shared memory, the device has {smem}"
                   if smem and spec.shared_bytes() > smem else None)
            if why:
                rows.append({**base, "status": f"skipped: {why}"})
                continue
            try:
                r = run_workbench(device, spec, problem, min_time_s=min_time_s, warm_s=warm_s)
                status = "diagnostic: results wrong by design" if spec.diagnostic else \
                    "ok" if r["correct"] else "WRONG"
                row = _row("coopmat beyond", env, r, macs=spec.macs(), impl=base["impl"], shape=label,
                           tiling=spec.label, step=step, diagnostic=spec.diagnostic, status=status,
                           out="int8" if spec.requant else "int32", shared_bytes=spec.shared_bytes(),
                           pad=int(getattr(spec, "pad", 0)), vec=getattr(spec, "vec", 1),
                           frags=getattr(spec, "frags", 1), ksteps=getattr(spec, "ksteps", 0),
                           stages=spec.stages, modelled_bank_ways=(CC.fragment_bank_ways(spec)
                                                                   if isinstance(spec, CC.CoopmatConvSpec) else None))
            except Exception as exc:  # noqa: BLE001
                row = {**base, "status": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
            rows.append(row)
            if show_progress:
                print(f"[coopmat-beyond {time.perf_counter() - t0:6.1f} s] {label} {step}: {spec.label}: "
                      f"{row.get('TOP/s', math.nan):,.1f} TOP/s {row['status']}", flush=True)
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    import argparse
    from .. import vk
    from ..measure.results import ResultsWriter
    ap = argparse.ArgumentParser(prog="python -m workbench.benchmarks.coopmat_anchor", description=__doc__.split("\n")[0])
    ap.add_argument("--sample", help=f"the vk_cooperative_matrix_perf checkout (default ${ENV})")
    ap.add_argument("--out", default=".", help="folder for coopmat_anchor.csv (and coopmat_beyond.csv)")
    ap.add_argument("--quick", action="store_true", help="one small shape, short timing")
    ap.add_argument("--beyond", action="store_true", help="also the operand-load steps (coopmat_beyond.csv)")
    args = ap.parse_args(argv)
    try:
        root = sample_dir(args.sample)
    except SampleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = vk.get_device()
    env = environment(device)
    with ResultsWriter(out / "coopmat_anchor", env) as writer:
        anchor_suite(device, writer, quick=args.quick, sample=root)
    print(f"wrote {writer.csv_path}")
    if args.beyond:
        with ResultsWriter(out / "coopmat_beyond", env) as writer:
            beyond_suite(device, writer, quick=args.quick)
        print(f"wrote {writer.csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
