"""ET-VK's int8 conv2d, both paths ``q8ta_conv2d`` picks between, and the weight packer they use — dispatched as
their C++ does (Q8taConv2d.cpp, Q8taConv2dIm2Col.cpp, Q8taConv2dPW.cpp at cff6f4dd32):

* ``q8ta_conv2d`` — the general shader (``q8ta_conv2d[_fallback]_float``): one thread per 4 widths × 4 output
  channels, looping over ky, the input's 4-channel blocks of its group, kx. ``q8ta_conv2d`` (the op) takes it
  unless the im2col path is chosen: ``in_channels_per_group % 4 == 0`` and, off Mali, ``groups == 1`` and
  (``in_channels_per_group >= 32`` or ``H_out·W_out <= 4096``); on Mali whenever channels per group allow.
* ``q8ta_im2col`` — the im2col shader alone: the int8 input (4W4C or 4C1W) → a 4W4C buffer ``[K, H_out,
  align4(W_out)]``, ``K = align4(Kh·Kw·ICg)·groups`` ordered (group, ky, kx, channel), ``input_zp`` outside the
  input. Checked exactly against numpy (``im2col``).
* ``q8ta_conv2d_im2col`` — the im2col path as ET-VK records it: ``q8ta_im2col`` into a 4W4C scratch buffer, a
  barrier, then the GEMM ``q8ta_conv2d_pw[_fallback]_float`` on it with push constants ``K4_per_group =
  ceil(K / groups / 4)``, ``OC4_per_group = ceil(OC / groups / 4)`` and the weight packed as a linear weight
  (``[OC, K_per_group]`` through ``pack_q8_linear_weight``). The Dispatch's last dispatch is the GEMM (its
  ``variant``); the im2col step is ``before`` (``dispatch.Step``); timings cover both. ``host_im2col=True`` runs
  the GEMM alone on the host's ``im2col``.
* ``pack_q8_conv2d_weights`` — ``prepack_quantized_conv2d_weight``: the export's ``[OC, align4(Kh·Kw·ICg)]`` int8
  weight (patterns/quantized_convolution.py: permute to (OC, Kh, Kw, ICg), width padded to 4) → an ``rgba32i``
  texture of ``Kw·OC4 × ICg4·Kh`` texels (``pack_conv2d_weight`` in ``_conv``); push constants ``sizes_pc_of``
  (WHCN ``{4·Kw·OC4, ICg4·Kh, 1, 1}``) and ``orig_sizes = {OC, Kh, Kw, ICg}``; global ``{Kw·OC4, ICg4·Kh, 1}`` with
  ``create_local_wg_size``. The staging buffer is read as ``ivec4``: the workbench pads it to 16 bytes.

What the general shader's C++ fixes: bindings output, input, weight (``isampler2D``), weight sums (``ivec4``),
weight scales, bias (``vec4``; a zero buffer when there is none), then the ``BufferMetadata`` UBOs of output and
input and ``Conv2DParams`` (``create_conv2d_params``); push constants ``{input_scale, input_zp, 1.0f /
output_scale, output_zp}``; spec constants apply_bias (3), activation_type (4, relu 1), the hashed layouts of
input (5) and output (6); global ``{W4, H, C4}`` of the output with ``pick_q8ta_conv2d_local_wg_size``. Input and
output are 4W4C or 4C1W; grouped convs need ``in_channels_per_group % 4 == 0`` (VK_CHECK_COND) and, between
``1 < groups < OC``, ``out_channels_per_group % 4 == 0`` (the export does not match the pattern otherwise).
Weight sums, scales and bias are padded to a multiple of 4 as the export pads them.

Batch: the shaders write batch 0 only (``outp_tidx.data[3] = 0``; nothing in the global size covers N): batch > 1
is refused unless ``etvk_batch=True``, which dispatches it as ET-VK would (later images stay unwritten).

The references are the shaders' own arithmetic (``_conv.requantize_sub_mul`` for the general shader,
``_conv.requantize_fma`` for the GEMM) with the multiply-add split, as lavapipe computes it: exact there. A driver
that fuses it (the shaders say no ``precise``) may differ by 1 LSB on the elements where the two forms quantize
differently, and only there (``_conv.contraction_tolerance``; the row's ``fused_mismatch``); ``ref64_mismatch``
is ET-VK's float64 reference against the fp32 one.

Findings at cff6f4dd32 (tests/test_etvk_families_conv.py):

* ``groups == out_channels`` with 4 or more input channels per group computes wrong channels. The export lets it
  through (its pattern checks ``out_channels_per_group % 4`` only for ``1 < groups < OC``, and the conv is not
  depthwise unless ``in_channels_per_group == 1``), e.g. ``Conv2d(8, 2, 3, groups=2)`` lowers to
  ``et_vk.q8ta_conv2d`` with groups 2 and runs the general shader, which takes one group per block of 4 output
  channels (``group_idx = oc4·4 / OC_per_group``): channel 1 reads input channels 0..3. The GEMM
  (``group_idx = oc_block / OC4_per_group``) and q8ta_conv2d_transposed.glsl index the same way.
* a grouped 1×1 conv, e.g. ``Conv2d(16, 16, 1, groups=4)``, lowers to ``et_vk.q8ta_conv2d_pw`` (the export's
  ``is_pointwise_conv`` does not look at groups) with a ``[16, 4]`` weight and ``groups = 4``, which
  ``q8ta_conv2d_pw`` ignores: ``prepack_quantized_conv2d_pw_weight`` packs it as ``[OC, IC] = [16, 16]`` (reading
  past the 64-byte weight) and the shader sums over all 16 input channels. Seen by lowering with the executorch
  1.5.1 wheel (whose patterns/quantized_convolution.py is cff6f4dd32's) and reading the C++; not run on a device
  (the packing reads out of bounds).
"""
from __future__ import annotations

import math
import struct

import numpy as np
import torch

from ..codegen import Codegen
from ..dispatch import Dispatch, Resource, Step, create_local_wg_size, int8_layout, nchw_sizes, packed_weight_output, \
    packed_words, pick_hw_square_wg_size
from . import _conv as C
from ._linear import prepack_weight as linear_prepack


def pick_q8ta_conv2d_local_wg_size(global_size, out_h: int) -> tuple:
    """``pick_q8ta_conv2d_local_wg_size`` (Q8taConv2d.cpp)."""
    x, y, z = global_size
    if out_h >= 100 and x >= 24 and z >= 24:
        return (8, 1, 8)
    if x >= 4 and y >= 2 and z >= 8:
        return (4, 2, 8)
    return C.conv_local_wg_size(global_size)


def uses_im2col(in_channels: int, groups: int, out_h: int, out_w: int, mali: bool = False) -> bool:
    """Which path ``q8ta_conv2d`` (the op) takes: True = ``q8ta_conv2d_im2col``, False = the general shader."""
    icg = in_channels // groups
    eligible = icg % 4 == 0
    if mali:
        return eligible
    return eligible and groups == 1 and (icg >= 32 or out_h * out_w <= 4096)


class _Conv:
    """One checked int8 conv problem: sizes, parameters, random operands, exact int result."""

    def __init__(self, op, shape, out_channels, kernel_size, stride, padding, dilation, groups, bias, seed,
                 etvk_batch, *, need_icg4: bool, im2col: bool = False):
        self.n, self.c, self.h, self.w = nchw_sizes(shape)
        self.oc = int(out_channels if out_channels is not None else self.c)
        self.kernel = C.pair(kernel_size, "kernel_size", op, 1)
        self.stride = C.pair(stride, "stride", op, 1)
        self.padding = C.pair(padding, "padding", op, 0)
        self.dilation = C.pair(dilation, "dilation", op, 1)
        self.groups = int(groups)
        if self.oc < 1 or self.groups < 1:
            raise ValueError(f"{op}: out_channels and groups must be >= 1, given {self.oc} and {self.groups}")
        if self.c % self.groups or self.oc % self.groups:
            raise ValueError(f"{op}: groups must divide the input and output channels: given {self.c} in, "
                             f"{self.oc} out, groups {self.groups}")
        self.icg, self.ocg = self.c // self.groups, self.oc // self.groups
        if (need_icg4 or self.groups > 1) and self.icg % 4:
            why = ("VK_CHECK_COND(conv_params.in_channels_per_group % 4 == 0) in Q8taConv2dIm2Col.cpp" if im2col
                   else "for groups > 1, VK_CHECK_COND(in_channels_per_group % 4 == 0) in Q8taConv2d.cpp")
            raise ValueError(f"{op}: ET-VK needs the input channels per group a multiple of 4 ({why}); given "
                             f"{self.c} channels / {self.groups} groups = {self.icg}")
        if 1 < self.groups < self.oc and self.ocg % 4:
            raise ValueError(f"{op}: ET-VK's export matches grouped convs only with output channels per group a "
                             f"multiple of 4 (patterns/quantized_convolution.py); given {self.oc} / {self.groups} "
                             f"= {self.ocg}")
        C.refuse_batch(op, self.n, etvk_batch)
        self.ho, self.wo = C.out_hw(op, self.h, self.w, self.kernel, self.stride, self.padding, self.dilation)
        g = torch.Generator().manual_seed(seed)
        self.q_in, self.weight, self.w_scales, self.bias = C.random_operands(
            g, (self.n, self.c, self.h, self.w), (self.oc, self.icg, *self.kernel), self.oc, bias)
        self.adjusted = C.int_conv2d(self.q_in, self.weight, C.IN_ZP, self.stride, self.padding, self.dilation,
                                     self.groups)
        self.out_scale = C.output_scale(self.adjusted, self.w_scales, self.bias)
        self.mat = C.weight_matrix(self.weight)  # [OC, align4(Kh·Kw·ICg)]
        self.sums = torch.from_numpy(self.mat.astype(np.int32).sum(1))
        self.out_sizes = (self.n, self.oc, self.ho, self.wo)
        self.params_ubo = C.conv2d_params(self.kernel, self.stride, self.padding, self.dilation, self.groups,
                                          self.c, self.oc)

    def ref64(self, relu):
        return C.reference_fp64(self.adjusted, self.w_scales, self.bias, C.IN_SCALE, self.out_scale, C.OUT_ZP, relu)

    def shape_text(self):
        return C.shape_text(self.n, self.c, self.h, self.w, self.oc, self.ho, self.wo, self.kernel, self.stride,
                            self.padding, self.dilation, self.groups)

    def channel_buffers(self):
        return C.channel_buffers(self.sums, self.w_scales, self.bias, self.oc)


def q8ta_conv2d(gen: Codegen, shape=(1, 8, 9, 11), out_channels: int | None = 12, *, kernel_size=3, stride=1,
                padding=1, dilation=1, groups: int = 1, in_layout: str = "4W4C", out_layout: str = "4W4C",
                bias: bool = True, relu: bool = False, fallback: bool = False, etvk_batch: bool = False,
                seed: int = 0) -> Dispatch:
    """``add_q8ta_conv2d_node`` (the general shader) on an int8 NCHW input; see the module docstring."""
    op = "q8ta_conv2d"
    cv = _Conv(op, shape, out_channels, kernel_size, stride, padding, dilation, groups, bias, seed, etvk_batch,
               need_icg4=False)
    inp, out = C.conv_layouts(op, in_layout, out_layout)
    variant = f"q8ta_conv2d{'_fallback' if fallback else ''}_float"
    C.expand_variant(gen, op, variant, "q8ta_conv2d")
    texels = C.pack_conv2d_weight(cv.mat, cv.kernel, cv.icg)
    return C.sub_mul_dispatch(op, variant, inp, out, cv.q_in, cv.adjusted, texels, cv.sums, cv.w_scales, cv.bias,
                              cv.params_ubo, relu,
                              lambda global_size: pick_q8ta_conv2d_local_wg_size(global_size, cv.ho),
                              macs=math.prod(cv.out_sizes) * cv.icg * cv.kernel[0] * cv.kernel[1],
                              shape=cv.shape_text(),
                              etvk_path="im2col" if uses_im2col(cv.c, cv.groups, cv.ho, cv.wo) else "general")


def im2col(q_in: torch.Tensor, kernel, stride, padding, dilation, groups: int, out_h: int, out_w: int,
           zp: int) -> torch.Tensor:
    """What ``q8ta_im2col`` writes, as an int8 NCHW tensor ``[1, K, H_out, align4(W_out)]``: element (k, y, x) with
    ``k = group·K_per_group + (ky·Kw + kx)·ICg + c`` is the input at channel ``group·ICg + c``, row
    ``y·sy - py + ky·dy``, column ``x·sx - px + kx·dx`` (zp outside the input; the columns past W_out are computed
    the same way). Input channels per group must be a multiple of 4 (then K_per_group = Kh·Kw·ICg)."""
    _, c, h, w = q_in.shape
    icg = c // groups
    kh, kw = kernel
    w4 = 4 * C.ceil4(out_w)
    ys = torch.arange(out_h)[:, None] * stride[0] - padding[0] + torch.arange(kh)[None, :] * dilation[0]  # [H, ky]
    xs = torch.arange(w4)[:, None] * stride[1] - padding[1] + torch.arange(kw)[None, :] * dilation[1]  # [W, kx]
    padded = torch.full((c, h + 2, w + 2), zp, dtype=torch.int8)
    padded[:, 1:-1, 1:-1] = q_in[0]
    yi = torch.where((ys >= 0) & (ys < h), ys + 1, 0)  # row 0 / column 0 of `padded` hold zp
    xi = torch.where((xs >= 0) & (xs < w), xs + 1, 0)
    # [C, H, ky, W, kx] → per group [ky, kx, ICg] × [H, W]
    win = padded[:, yi[:, :, None, None], xi[None, None, :, :]]
    win = win.reshape(groups, icg, out_h, kh, w4, kw).permute(0, 3, 5, 1, 2, 4)
    return win.reshape(1, groups * kh * kw * icg, out_h, w4).contiguous()


def q8ta_im2col(gen: Codegen, shape=(1, 8, 9, 11), out_channels: int | None = 12, *, kernel_size=3, stride=1,
                padding=1, dilation=1, groups: int = 1, in_layout: str = "4W4C", etvk_batch: bool = False,
                seed: int = 0, relu: bool = False, fallback: bool = False, out_layout: str | None = None) -> Dispatch:
    """``add_q8ta_im2col_node``: the im2col matrix of the conv's input, checked exactly against ``im2col``.
    Bindings im2col output (``ivec4`` buffer), input, the BufferMetadata of im2col output and input, Conv2DParams;
    push constant ``{int zp}`` (the input zero point); spec constants 1 (apply_bias, unused), the hashed layouts of
    im2col output (4) and input (5); global ``{K4·W4·H, 1, 1}`` of the im2col sizes, local ``{64, 1, 1}``."""
    op = "q8ta_im2col"
    given = {k: v for k, v in (("relu", relu), ("fallback", fallback), ("out_layout", out_layout)) if v}
    if given:  # the conv's own options (`etvk run` passes them): im2col has no epilogue, one variant, 4W4C out
        raise ValueError(f"{op}: the im2col step takes no {', '.join(given)} (it writes a 4W4C copy of the input's "
                         f"windows); expected none, given {given}")
    cv = _Conv(op, shape, out_channels, kernel_size, stride, padding, dilation, groups, False, seed, etvk_batch,
               need_icg4=True, im2col=True)
    inp, _ = C.conv_layouts(op, in_layout, "4W4C")
    col_lay = int8_layout("4W4C")
    C.expand_variant(gen, op, "q8ta_im2col", "q8ta_im2col")
    k = cv.mat.shape[1] * cv.groups
    col_sizes = (1, k, cv.ho, 4 * C.ceil4(cv.wo))
    expected = im2col(cv.q_in[:1], cv.kernel, cv.stride, cv.padding, cv.dilation, cv.groups, cv.ho, cv.wo, C.IN_ZP)
    resources = [
        Resource("buffer", nbytes=4 * col_lay.num_words(col_sizes), name="t_packed_int8_output"),
        Resource("buffer", packed_words(inp, cv.q_in), name="t_packed_int8_input"),
        Resource("ubo", col_lay.buffer_metadata(col_sizes), name="im2col_outp"),
        Resource("ubo", inp.buffer_metadata((cv.n, cv.c, cv.h, cv.w)), name="inp"),
        Resource("ubo", cv.params_ubo, name="conv2d_params"),
    ]
    spec = {3: 1, 4: col_lay.spec_constant(), 5: inp.spec_constant()}
    global_size = (C.ceil4(k) * C.ceil4(col_sizes[3]) * cv.ho, 1, 1)
    return Dispatch(op, "q8ta_im2col", resources, struct.pack("<i", C.IN_ZP), spec, global_size, (64, 1, 1), 0,
                    C.decoder(col_lay, col_sizes), expected, bytes_moved=cv.q_in.numel() + math.prod(col_sizes),
                    params={"shape": cv.shape_text(), "in_layout": inp.name, "im2col": "x".join(map(str, col_sizes))})


def q8ta_conv2d_im2col(gen: Codegen, shape=(1, 8, 9, 11), out_channels: int | None = 12, *, kernel_size=3,
                       stride=1, padding=1, dilation=1, groups: int = 1, in_layout: str = "4W4C",
                       out_layout: str = "4W4C", bias: bool = True, relu: bool = False, fallback: bool = False,
                       host_im2col: bool = False, etvk_batch: bool = False, seed: int = 0) -> Dispatch:
    """ET-VK's im2col path (``q8ta_conv2d_im2col``): ``q8ta_im2col`` into a 4W4C scratch buffer, then the GEMM
    (``add_q8ta_conv2d_pw_node`` on it), recorded back to back as ET-VK does; see the module docstring.
    ``host_im2col=True`` runs the GEMM alone on the numpy im2col (``im2col``), the same bytes."""
    op = "q8ta_conv2d_im2col"
    cv = _Conv(op, shape, out_channels, kernel_size, stride, padding, dilation, groups, bias, seed, etvk_batch,
               need_icg4=True, im2col=True)
    col_lay = int8_layout("4W4C")
    inp, out = C.conv_layouts(op, in_layout, out_layout)
    variant = f"q8ta_conv2d_pw{'_fallback' if fallback else ''}_float"
    expanded = C.expand_variant(gen, op, variant, "q8ta_conv2d_pw")
    tile_n4, tile_m4 = int(expanded.define("TILE_N4") or 1), int(expanded.define("TILE_M4") or 1)
    kpg = cv.mat.shape[1]
    k = kpg * cv.groups
    col_sizes = (1, k, cv.ho, 4 * C.ceil4(cv.wo))
    col = im2col(cv.q_in[:1], cv.kernel, cv.stride, cv.padding, cv.dilation, cv.groups, cv.ho, cv.wo, C.IN_ZP)
    expected, fused = (C.requantize_fma(cv.adjusted, cv.w_scales, cv.bias, C.IN_SCALE, cv.out_scale, C.OUT_ZP,
                                        relu, fused=f) for f in (False, True))
    texels = linear_prepack(cv.mat)  # [K4_per_group, OC4, 4]: prepack_quantized_linear_weight of [OC, K_per_group]
    resources = [
        Resource("buffer", nbytes=4 * out.num_words(cv.out_sizes), name="t_packed_int8_output"),
        Resource("buffer", packed_words(col_lay, col) if host_im2col else None,
                 nbytes=4 * col_lay.num_words(col_sizes), name="t_packed_int8_input"),
        Resource("image", texels, extent=(texels.shape[1], texels.shape[0]), fmt="rgba32i",
                 name="t_packed_int8_weight"),
        *cv.channel_buffers(),
        Resource("ubo", out.buffer_metadata(cv.out_sizes), name="outp"),
        Resource("ubo", col_lay.buffer_metadata(col_sizes), name="inp"),
    ]
    before, bindings = [], None
    if not host_im2col:  # add_q8ta_im2col_node first: conv input → the scratch (index 1), read by the GEMM
        C.expand_variant(gen, op, "q8ta_im2col", "q8ta_im2col")
        resources += [Resource("buffer", packed_words(inp, cv.q_in), name="conv_input"),
                      Resource("ubo", inp.buffer_metadata((cv.n, cv.c, cv.h, cv.w)), name="conv_input_meta"),
                      Resource("ubo", cv.params_ubo, name="conv2d_params")]
        col_global = (C.ceil4(k) * C.ceil4(col_sizes[3]) * cv.ho, 1, 1)
        before = [Step("q8ta_im2col", (1, 8, 7, 9, 10), struct.pack("<i", C.IN_ZP),
                       {3: 1, 4: col_lay.spec_constant(), 5: inp.spec_constant()}, col_global, (64, 1, 1))]
        bindings = tuple(range(8))
    k4_per_group = C.ceil4(k // cv.groups)
    oc4_per_group = C.ceil4(cv.oc // cv.groups)
    push = C.requant_push(cv.out_scale) + struct.pack("<2i", k4_per_group, oc4_per_group)
    spec = C.epilogue_spec(cv.bias is not None, relu, out, col_lay)
    global_size = (math.ceil(C.ceil4(cv.oc) / tile_n4), math.ceil(C.ceil4(cv.wo) / tile_m4), cv.ho)
    return Dispatch(op, variant, resources, push, spec, global_size, pick_hw_square_wg_size(global_size), 0,
                    C.decoder(out, cv.out_sizes), expected, **C.contraction_tolerance(expected, fused),
                    bytes_moved=math.prod(col_sizes) * (1 if host_im2col else 2)
                    + (0 if host_im2col else cv.q_in.numel()) + math.prod(cv.out_sizes) + texels.nbytes
                    + 3 * 16 * C.ceil4(cv.oc),
                    macs=math.prod(cv.out_sizes) * cv.icg * cv.kernel[0] * cv.kernel[1],
                    params={"shape": cv.shape_text(), "in_layout": "host im2col" if host_im2col else inp.name,
                            "out_layout": out.name, "bias": cv.bias is not None,
                            "relu": bool(relu), "im2col": "x".join(map(str, col_sizes)),
                            "etvk_path": "im2col" if uses_im2col(cv.c, cv.groups, cv.ho, cv.wo) else "general",
                            "fused_mismatch": C.mismatch(expected, fused),
                            "ref64_mismatch": C.mismatch(expected, cv.ref64(relu))},
                    before=before, bindings=bindings)


def pack_q8_conv2d_weights(gen: Codegen, shape=(10, 6, 3, 3), *, storage: str = "texture2d", weight=None,
                           seed: int = 0) -> Dispatch:
    """ET-VK's prepack of an int8 conv weight ``[OC, ICg, Kh, Kw]`` (``prepack_quantized_conv2d_weight``), checked
    exactly against ``_conv.pack_conv2d_weight``; ``storage="buffer"`` is the variant past the device's texture
    limits (the buffer holds the same texels row by row)."""
    op = "pack_q8_conv2d_weights"
    if storage not in ("texture2d", "buffer"):
        raise ValueError(f"{op}: storage must be 'texture2d' or 'buffer', got {storage!r}")
    if weight is None:
        dims = tuple(int(s) for s in shape)
        if len(dims) != 4 or min(dims) < 1:
            raise ValueError(f"{op}: the weight is [OC, IC_per_group, Kh, Kw] with sizes >= 1, given {tuple(shape)}")
        weight = torch.randint(-127, 128, dims, dtype=torch.int8, generator=torch.Generator().manual_seed(seed))
    weight = torch.as_tensor(weight)
    if weight.dtype != torch.int8 or weight.dim() != 4:
        raise ValueError(f"{op}: an int8 [OC, IC_per_group, Kh, Kw] weight, given {weight.dtype} "
                         f"{tuple(weight.shape)}")
    variant = f"pack_q8_conv2d_weights_{storage}"
    C.expand_variant(gen, op, variant, "pack_q8_conv2d_weights")
    oc, icg, kh, kw = weight.shape
    mat = C.weight_matrix(weight)
    texels = C.pack_conv2d_weight(mat, (kh, kw), icg)
    ny, nx = texels.shape[:2]
    staged = np.zeros(-(-mat.size // 16) * 16, dtype=np.int8)  # read as ivec4: whole 16-byte groups
    staged[:mat.size] = mat.reshape(-1)
    out, decode = packed_weight_output(ny, nx, storage)
    resources = [out, Resource("buffer", staged.view(np.int32), name="t_int8_weight")]
    push = struct.pack("<4i4i", 4 * nx, ny, 1, 1, oc, kh, kw, icg)
    global_size = (nx, ny, 1)
    return Dispatch(op, variant, resources, push, {}, global_size, create_local_wg_size(global_size), 0, decode,
                    torch.from_numpy(texels), bytes_moved=mat.size + texels.nbytes,
                    params={"shape": f"{oc}x{icg}x{kh}x{kw}", "storage": storage})
