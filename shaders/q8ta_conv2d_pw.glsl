#version 450
// q8ta_conv2d_pw: pointwise (1x1, stride 1, no padding, groups 1) int8 convolution with int32 accumulation and
// per-output-channel requantization, after ET-VK's et_vk.q8ta_conv2d_pw (reference etvk.md section 3).
//
//   out[n, oc, h, w] = clamp(roundEven(f * output_inv_scale) + output_zp, -128, 127)
//   f   = float(acc - input_zp * weight_sums[oc]) * (weight_scales[oc] * input_scale) + bias[oc]
//   f   = max(f, 0) when activation != 0 (ReLU), before the output scale
//   acc = sum over ic of q_in[n, ic, h, w] * w[oc, ic]    (int32, saturating packed dot products)
// Every float step is one correctly rounded fp32 operation in this order: int->float, the scale product, the
// multiply, the bias add (skipped without bias), ReLU, the output-scale multiply, roundEven (round half to even).
// `precise` forbids fusing the multiply and the add. Vulkan requires fp32 add and multiply to be correctly
// rounded but lets fma() be computed either fused or as a multiply then an add (lavapipe does the latter), so
// ET-VK's fma() can differ by 1 LSB between devices; this order gives the same bits on every conforming device.
// (ET-VK also uses round(), whose .5 case GLSL leaves to the implementation.)
// Weights are symmetric (no weight zero point); only the activation zero point is corrected, through the
// precomputed weight sums.
//
// Tiling (compile-time defines; each combination is its own SPIR-V, so the register count really changes):
//   TILE_M   4-width blocks per thread            -> 4*TILE_M output widths
//   TILE_N4  4-output-channel blocks per thread    -> 4*TILE_N4 output channels
//   TILE_K4  4-input-channel blocks per inner step: all its operands are loaded before the dot products
//   accumulators per thread: ivec4 acc[4*TILE_M][TILE_N4] = 16*TILE_M*TILE_N4 int32
// Dispatch: global = (ceil(OC4 / TILE_N4), ceil(W4 / TILE_M), N * H); thread (x, y, z) computes output channels
// [4*TILE_N4*x, 4*TILE_N4*(x+1)), widths [4*TILE_M*y, 4*TILE_M*(y+1)) of row h = z % H of batch n = z / H.
//
// Other defines: USE_INT_DOT_EXT (1: packed dot product, needs shaderIntegerDotProduct; 0: portable fallback),
// SATURATE (1: OpSDotAccSat as ET-VK; 0: OpSDot + add) and
// REGISTER_OPERANDS (1: a diagnostic build with WRONG results by design: the first K step's operands are loaded
// once and every step uses them XORed with the step index, so the dot-product stream and the epilogue stay and the
// operand loads and their address arithmetic go; it measures what the loads cost against the dot-product roof),
// WEIGHT_K_INNER (0: weight element [k4 * OC4P + oc4], ET-VK's texel order; 1: [oc4 * IC4P + k4], one output
// block's input-channel blocks consecutive, so a thread's TILE_K4 weight blocks of a step are one contiguous run),
// HOIST_ADDRESSES (0: every load's index computed in the K loop, the input's clamped; 1: per-tile base indices
// computed once, advanced by a constant per step, loads at loop-invariant offsets from them, and the one step that
// can run past IC4 peeled off as a clamped tail, so the main loop has no clamp),
// WRITE_ACCUMULATORS (1: a debug build that writes the raw int32 accumulators instead of int8 outputs, as a dense
// (N, H, W, OC) int array, logical elements only).
//
// Tensors (layouts: hashed layouts as spec constants + BufferMetadata UBOs, from workbench/layouts.py):
//   input : int8x4, must be 4W4C; read as ivec4 = one 4-width x 4-channel block (word m = width w0+m,
//           byte b = channel c0+b). Block of (n, h, w4, c4) = block of (n, h, w4, 0) (indexing.glslh, input
//           layout) + c4 * s_c (the block-unit stride of C in the input's BufferMetadata; 1 for 4W4C).
//   output: int8x4 in 4W4C, 4C1W or 4C (packed dim C, block 4; outer dim W, block 4 or 1); word index from
//           indexing.glslh. Only logical widths and channel blocks are written; padded channel lanes of a
//           written word hold output_zp (as ET-VK writes them).
//   weight: a storage buffer of ivec4, element [k4 * OC4P + oc4] (WEIGHT_K_INNER 1: [oc4 * IC4P + k4]):
//           component j = output channel 4*oc4 + j, byte b of it = input channel 4*k4 + b (ET-VK's texel
//           (x = oc4, y = k4) of its RGBA32I texture).
//           OC4P and IC4P = OC4 and IC4 rounded up to multiples of 4, zero-filled: any TILE_N4 / TILE_K4 reads
//           inside the buffer, and the padding contributes nothing.
//   weight_sums (ivec4), weight_scales (vec4), bias (vec4): per output-channel block, OC4P entries, zero-filled.
//
// Bindings: 0 output, 1 input, 2 weight, 3 weight sums, 4 weight scales, 5 bias, 6 output metadata,
// 7 input metadata. Push constants: input_scale, input_zp, output_inv_scale, output_zp.
// Spec constants: 0-2 local size, 3 apply_bias, 4 activation (>0: ReLU), 5 output layout, 6 input layout.

#extension GL_EXT_control_flow_attributes : require

#ifndef TILE_M
#define TILE_M 1
#endif
#ifndef TILE_N4
#define TILE_N4 1
#endif
#ifndef TILE_K4
#define TILE_K4 1
#endif
#ifndef SATURATE
#define SATURATE 1
#endif
#ifndef WRITE_ACCUMULATORS
#define WRITE_ACCUMULATORS 0
#endif
#ifndef REGISTER_OPERANDS
#define REGISTER_OPERANDS 0
#endif
#ifndef WEIGHT_K_INNER
#define WEIGHT_K_INNER 0
#endif
#ifndef HOIST_ADDRESSES
#define HOIST_ADDRESSES 0
#endif

#define TILE_W (4 * TILE_M)

#include "indexing.glslh"
#include "int8_dot.glslh"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(constant_id = 3) const int apply_bias = 1;
layout(constant_id = 4) const int activation = 0;
layout(constant_id = 5) const int out_layout = 0x44023102;  // 4W4C
layout(constant_id = 6) const int in_layout = 0x44023102;   // 4W4C

layout(std430, set = 0, binding = 0) writeonly buffer Out { int t_out[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { ivec4 t_in[]; };
layout(std430, set = 0, binding = 2) readonly buffer Weight { ivec4 t_weight[]; };
layout(std430, set = 0, binding = 3) readonly buffer WeightSums { ivec4 t_weight_sums[]; };
layout(std430, set = 0, binding = 4) readonly buffer WeightScales { vec4 t_weight_scales[]; };
layout(std430, set = 0, binding = 5) readonly buffer Bias { vec4 t_bias[]; };
layout(std140, set = 0, binding = 6) uniform OutMeta { BufferMetadata outp; };
layout(std140, set = 0, binding = 7) uniform InMeta { BufferMetadata inp; };

layout(push_constant) uniform Params {
  float input_scale;
  int input_zp;
  float output_inv_scale;
  int output_zp;
} pc;

// Requantize the 4 accumulators of output channels 4*oc4 .. 4*oc4+3 at width w and store them as one word;
// nothing is stored past the tensor (w >= W or oc4 >= OC4); padded channel lanes get output_zp.
void requantize_store(ivec4 acc, int w, int oc4, int W, int OC, int OC4, int n, int h, ivec4 sums, vec4 scale,
                      vec4 bias) {
  if (w >= W || oc4 >= OC4) {
    return;
  }
  const ivec4 adj = acc - pc.input_zp * sums;
  precise vec4 f = vec4(adj) * scale;
  if (apply_bias != 0) {
    f = f + bias;
  }
  if (activation != 0) {
    f = max(f, vec4(0.0));
  }
  precise const vec4 g = f * pc.output_inv_scale;
  // clamp in float first: converting an out-of-range float to int is undefined
  const vec4 r = clamp(roundEven(g) + float(pc.output_zp), -128.0, 127.0);
  const bvec4 valid = lessThan(ivec4(4 * oc4) + ivec4(0, 1, 2, 3), ivec4(OC));
  const ivec4 q = mix(ivec4(pc.output_zp), ivec4(r), valid);
  t_out[tidx_to_word_idx(outp, ivec4(w, h, 4 * oc4, n), out_layout)] = pack4x8(q);
}

// One input word (4 channels of one width) against the 4 output channels of a weight block.
// SATURATE 1: OpSDotAccSat, as ET-VK; 0: OpSDot and a wrapping add, exact too, since |acc| <= Cin*128*128 stays
// far inside int32 for Cin <= MAX_IN_CHANNELS (on an H200 the saturating form ran at 40 % of the plain one's peak).
#if SATURATE
#define DOT_ACC dot4x8_acc_sat
#else
#define DOT_ACC dot4x8_acc
#endif

ivec4 dot_block(int a, ivec4 w, ivec4 acc) {
  return ivec4(DOT_ACC(a, w.x, acc.x),
               DOT_ACC(a, w.y, acc.y),
               DOT_ACC(a, w.z, acc.z),
               DOT_ACC(a, w.w, acc.w));
}

void main() {
  const ivec4 out_sizes = meta_sizes(outp);  // WHCN
  const int W = out_sizes.x;
  const int H = out_sizes.y;
  const int OC = out_sizes.z;
  const int N = out_sizes.w;
  const int OC4 = (OC + 3) >> 2;
  const int OC4P = (OC4 + 3) & ~3;
  const int W4 = (W + 3) >> 2;

  const int oc4_0 = int(gl_GlobalInvocationID.x) * TILE_N4;
  const int w4_0 = int(gl_GlobalInvocationID.y) * TILE_M;
  const int nh = int(gl_GlobalInvocationID.z);
  if (oc4_0 >= OC4 || w4_0 >= W4 || nh >= N * H) {
    return;
  }
  const int n = nh / H;
  const int h = nh - n * H;

  const int IC4 = (int(meta_sizes(inp).z) + 3) >> 2;
  const ivec4 in_strides = meta_strides(inp);  // WHCN, block units
  const int s_c = in_strides.z;

  // First block of each 4-width column of the tile. Columns past the last width block re-read the last one
  // (cheaper than a branch; their results are never stored).
  int in_base[TILE_M];
  [[unroll]] for (int m = 0; m < TILE_M; ++m) {
    const int w4 = min(w4_0 + m, W4 - 1);
    // word of (w = 4*w4, h, c = 0, n) through the input's layout; 4W4C has 4 words (one ivec4) per block
    in_base[m] = tidx_to_word_idx(inp, ivec4(4 * w4, h, 0, n), in_layout) >> 2;
  }

  ivec4 acc[TILE_W][TILE_N4];
  [[unroll]] for (int i = 0; i < TILE_W; ++i) {
    [[unroll]] for (int j = 0; j < TILE_N4; ++j) {
      acc[i][j] = ivec4(0);
    }
  }

  // Element of weight block (k4, oc4) in the prepacked buffer (WEIGHT_K_INNER: see the header).
#if WEIGHT_K_INNER
  const int IC4P = (IC4 + 3) & ~3;
#define W_IDX(K4, OC4) ((OC4) * IC4P + (K4))
#else
#define W_IDX(K4, OC4) ((K4) * OC4P + OC4)  // written as before the option existed: the same SPIR-V
#endif

  // The dot products of one step: a[TILE_K4][TILE_M] input blocks against b[TILE_K4][TILE_N4] weight blocks.
#define STEP_DOTS()                                                                                    \
  [[unroll]] for (int kk = 0; kk < TILE_K4; ++kk) {                                                    \
    [[unroll]] for (int m = 0; m < TILE_M; ++m) {                                                      \
      [[unroll]] for (int wi = 0; wi < 4; ++wi) {                                                      \
        [[unroll]] for (int j = 0; j < TILE_N4; ++j) {                                                 \
          acc[4 * m + wi][j] = dot_block(a[kk][m][wi], b[kk][j], acc[4 * m + wi][j]);                  \
        }                                                                                              \
      }                                                                                                \
    }                                                                                                  \
  }

  // K loop: TILE_K4 input-channel blocks per step, all operands of a step loaded first. The last step may run
  // past IC4: its input block index is clamped (a valid load) and the weights there are zero (the prepack pads
  // K4 to a multiple of 4), so it adds nothing -- no remainder loop over partial steps.
#if REGISTER_OPERANDS
  ivec4 a0[TILE_K4][TILE_M];
  ivec4 b[TILE_K4][TILE_N4];
  [[unroll]] for (int kk = 0; kk < TILE_K4; ++kk) {
    [[unroll]] for (int m = 0; m < TILE_M; ++m) {
      a0[kk][m] = t_in[in_base[m] + min(kk, IC4 - 1) * s_c];
    }
    [[unroll]] for (int j = 0; j < TILE_N4; ++j) {
      b[kk][j] = t_weight[W_IDX(kk, oc4_0 + j)];
    }
  }
  // every dot product reads a varying input word, so none is loop-invariant (no hoisting)
#define LOAD_STEP(K4, CLAMP)                                                                           \
  [[unroll]] for (int kk = 0; kk < TILE_K4; ++kk) {                                                    \
    [[unroll]] for (int m = 0; m < TILE_M; ++m) {                                                      \
      a[kk][m] = a0[kk][m] ^ ivec4(K4);                                                                \
    }                                                                                                  \
  }
#endif

  // One K step: its operands (b only where loaded: the diagnostic build keeps its weights in registers), the dots.
#if REGISTER_OPERANDS
#define STEP(K4, CLAMP) { ivec4 a[TILE_K4][TILE_M]; LOAD_STEP(K4, CLAMP) STEP_DOTS() }
#else
#define STEP(K4, CLAMP) { ivec4 a[TILE_K4][TILE_M]; ivec4 b[TILE_K4][TILE_N4]; LOAD_STEP(K4, CLAMP) STEP_DOTS() }
#endif

#if HOIST_ADDRESSES
  // Base indices computed once; each step advances them by a constant and loads at offsets that do not depend
  // on the step (kk, j: immediates or values fixed for the whole loop). The input's channel blocks are
  // consecutive ivec4 in 4W4C (C is its fastest dim: s_c == 1, the only input layout the spec accepts), so a
  // column's TILE_K4 blocks of a step are at in_ptr[m] + kk.
  int in_ptr[TILE_M];
  [[unroll]] for (int m = 0; m < TILE_M; ++m) {
    in_ptr[m] = in_base[m];
  }
  int w_ptr = W_IDX(0, oc4_0);
  const int w_step = W_IDX(TILE_K4, 0);
  int w_off[TILE_K4][TILE_N4];  // loop-invariant offsets of the step's weight blocks
  [[unroll]] for (int kk = 0; kk < TILE_K4; ++kk) {
    [[unroll]] for (int j = 0; j < TILE_N4; ++j) {
      w_off[kk][j] = W_IDX(kk, j);
    }
  }
#if !REGISTER_OPERANDS
  // CLAMP: the tail step, whose input blocks past IC4 are clamped to the last one (weights there are zero)
#define LOAD_STEP(K4, CLAMP)                                                                           \
  [[unroll]] for (int kk = 0; kk < TILE_K4; ++kk) {                                                    \
    [[unroll]] for (int m = 0; m < TILE_M; ++m) {                                                      \
      a[kk][m] = t_in[in_ptr[m] + ((CLAMP) ? min(kk, IC4 - 1 - (K4)) : kk)];                           \
    }                                                                                                  \
    [[unroll]] for (int j = 0; j < TILE_N4; ++j) {                                                     \
      b[kk][j] = t_weight[w_ptr + w_off[kk][j]];                                                       \
    }                                                                                                  \
  }
#endif
  // Whole steps without a clamp, then at most one partial step (IC4 % TILE_K4 != 0) with it.
  const int k_whole = IC4 - IC4 % TILE_K4;
  int k4 = 0;
  for (; k4 < k_whole; k4 += TILE_K4) {
    STEP(k4, false)
    [[unroll]] for (int m = 0; m < TILE_M; ++m) {
      in_ptr[m] += TILE_K4;
    }
    w_ptr += w_step;
  }
#if TILE_K4 > 1
  if (k4 < IC4) {
    STEP(k4, true)
  }
#endif
#else  // !HOIST_ADDRESSES
#if !REGISTER_OPERANDS
#define LOAD_STEP(K4, CLAMP)                                                                           \
  [[unroll]] for (int kk = 0; kk < TILE_K4; ++kk) {                                                    \
    const int kc = min((K4) + kk, IC4 - 1);                                                            \
    [[unroll]] for (int m = 0; m < TILE_M; ++m) {                                                      \
      a[kk][m] = t_in[in_base[m] + kc * s_c];                                                          \
    }                                                                                                  \
    [[unroll]] for (int j = 0; j < TILE_N4; ++j) {                                                     \
      b[kk][j] = t_weight[W_IDX((K4) + kk, oc4_0 + j)];                                                \
    }                                                                                                  \
  }
#endif
  for (int k4 = 0; k4 < IC4; k4 += TILE_K4) {
    STEP(k4, true)
  }
#endif

#if WRITE_ACCUMULATORS
  // Debug: raw accumulators, dense (N, H, W, OC), logical elements only.
  [[unroll]] for (int i = 0; i < TILE_W; ++i) {
    const int w = 4 * w4_0 + i;
    if (w < W) {
      [[unroll]] for (int j = 0; j < TILE_N4; ++j) {
        const int oc0 = 4 * (oc4_0 + j);
        const int base = ((n * H + h) * W + w) * OC + oc0;
        [[unroll]] for (int lane = 0; lane < 4; ++lane) {
          if (oc0 + lane < OC) {
            t_out[base + lane] = acc[i][j][lane];
          }
        }
      }
    }
  }
#else
  // Per output-channel block: weight sums, the combined scale (weight scale x input scale) and the bias.
  ivec4 sums[TILE_N4];
  vec4 scales[TILE_N4];
  vec4 biases[TILE_N4];
  [[unroll]] for (int j = 0; j < TILE_N4; ++j) {
    const int oc4 = min(oc4_0 + j, OC4P - 1);  // blocks past OC4 are zero-padded and never stored
    sums[j] = t_weight_sums[oc4];
    scales[j] = t_weight_scales[oc4] * pc.input_scale;
    biases[j] = t_bias[oc4];
  }
  // The epilogue is unrolled by the preprocessor, one requantize_store() call per (width, channel block), not by
  // [[unroll]]: spirv-opt's loop unroller (glslc -O, shaderc 2023.2) drops the NoContraction decoration
  // (`precise`) on the copies it makes and then fuses their multiply + add into Fma, which some drivers compute
  // fused (NVIDIA) and some not (lavapipe): 1 LSB differences. The inliner keeps the decorations.
#define EPI(I, J) requantize_store(acc[I][J], 4 * w4_0 + (I), oc4_0 + (J), W, OC, OC4, n, h, sums[J], \
                                   scales[J], biases[J]);
#if TILE_N4 == 1
#define EPI_ROW(I) EPI(I, 0)
#elif TILE_N4 == 2
#define EPI_ROW(I) EPI(I, 0) EPI(I, 1)
#else
#define EPI_ROW(I) EPI(I, 0) EPI(I, 1) EPI(I, 2) EPI(I, 3)
#endif
  EPI_ROW(0) EPI_ROW(1) EPI_ROW(2) EPI_ROW(3)
#if TILE_M >= 2
  EPI_ROW(4) EPI_ROW(5) EPI_ROW(6) EPI_ROW(7)
#endif
#if TILE_M >= 4
  EPI_ROW(8) EPI_ROW(9) EPI_ROW(10) EPI_ROW(11) EPI_ROW(12) EPI_ROW(13) EPI_ROW(14) EPI_ROW(15)
#endif
#endif
}
