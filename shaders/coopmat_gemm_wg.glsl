#version 450
// The int8 GEMM / pointwise conv on workgroup-scope cooperative matrices (VK_NV_cooperative_matrix2): one BM x BN
// int32 accumulator per workgroup, A (M x K, K-contiguous: NHWC activations) and Bt (N x K: the weight [Cout, Cin])
// loaded BK bytes of K at a time straight from global memory through tensor layouts, so the driver chooses the
// staging through shared memory, its layout and the pipelining itself. This is the path of vk_cooperative_matrix_perf's
// `workgroup*` shaders (its s8 -> s32 best on the H200: 256 x 128 x 64 at 256 invocations) with the workbench's
// operands and epilogues. Only for devices that list VK_NV_cooperative_matrix2 and a flexible-dimension entry for
// int8 x int8 -> int32 at workgroup scope with THREADS invocations (kernels.coopmat_conv.WorkgroupGemmSpec checks).
//
// EPILOGUE: 0 = int32 C (M x N); 1 = the conv's int8 NHWC output, each accumulator requantized per element
// (coopMatPerElementNV: the element's column gives its output channel; q8ta_conv2d_pw.glsl's fp32 order, from
// conv_requant.glslh), converted to an int8 matrix and stored through the same tensor layout.
// DIAG (WRONG results by design): 2 = the first K tile's fragments multiplied again every step (MMAs alone);
// 3 = as 2 with no store (behind a condition that never holds).
// The host pads M, N, K to whole blocks. GM / GN / GK (defines): the padded GEMM's M, N, K as compile-time constants,
// as vk_cooperative_matrix_perf gives them (spec constants there); with run-time sizes (push constants) the H200's
// driver ran the same loads 8-10x slower. Without them the push constants are used.
#extension GL_KHR_cooperative_matrix : require
#extension GL_NV_cooperative_matrix2 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#pragma use_vulkan_memory_model

#ifndef BM
#define BM 256
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 64
#endif
#ifndef THREADS
#define THREADS 256
#endif
#ifndef EPILOGUE
#define EPILOGUE 0
#endif
#ifndef DIAG
#define DIAG 0
#endif
#if EPILOGUE != 0 && EPILOGUE != 1
#error "EPILOGUE is 0 (int32 C) or 1 (int8 conv output)"
#endif
#if DIAG != 0 && DIAG != 2 && DIAG != 3
#error "DIAG is 0, 2 or 3"
#endif

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

#if EPILOGUE == 0
layout(set = 0, binding = 0) writeonly buffer C { int32_t c[]; };
#else
layout(set = 0, binding = 0) writeonly buffer Out { int8_t out_bytes[]; };  // int8 NHWC (4C), M x N
#endif
#include "coopmat_conv_io.glslh"
#if EPILOGUE
#include "int8x4.glslh"
#include "conv_requant.glslh"

// one element of the accumulator: its column + the block's first channel is its output channel
int32_t requant_element(const in uint32_t row, const in uint32_t col, const in int32_t acc, const in uint32_t ch0) {
  const uint ch = ch0 + col;
  return conv_requantize1(acc, weight_sums[ch], weight_scales[ch] * p.input_scale, bias[ch]);
}
#endif

#ifdef GM
#define DIM_M uint(GM)
#define DIM_N uint(GN)
#define DIM_K uint(GK)
#else
#define DIM_M p.M
#define DIM_N p.N
#define DIM_K p.K
#endif

void main() {
  const uint blocks_n = DIM_N / BN;
  const uint brow = (gl_WorkGroupID.x / blocks_n) * BM;
  const uint bcol = (gl_WorkGroupID.x % blocks_n) * BN;

  tensorLayoutNV<2> layout_a = createTensorLayoutNV(2);
  tensorLayoutNV<2> layout_b = createTensorLayoutNV(2);
  tensorLayoutNV<2> layout_c = createTensorLayoutNV(2);
  layout_a = setTensorLayoutDimensionNV(layout_a, DIM_M, DIM_K);
  layout_b = setTensorLayoutDimensionNV(layout_b, DIM_N, DIM_K);  // Bt: B column-major
  layout_c = setTensorLayoutDimensionNV(layout_c, DIM_M, DIM_N);
  tensorViewNV<2, false, 1, 0> transpose_b = createTensorViewNV(2, false, 1, 0);

  coopmat<int32_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> acc =
      coopmat<int32_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(0);
#if DIAG >= 2
  coopmat<int8_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> fa;
  coopmat<int8_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> fb;
  coopMatLoadTensorNV(fa, a, 0, sliceTensorLayoutNV(layout_a, brow, BM, 0, BK));
  coopMatLoadTensorNV(fb, bt, 0, sliceTensorLayoutNV(layout_b, bcol, BN, 0, BK), transpose_b);
  for (uint k = 0; k < DIM_K; k += BK) {
    acc = coopMatMulAdd(fa, fb, acc);
  }
#else
  for (uint k = 0; k < DIM_K; k += BK) {
    coopmat<int8_t, gl_ScopeWorkgroup, BM, BK, gl_MatrixUseA> ma;
    coopmat<int8_t, gl_ScopeWorkgroup, BK, BN, gl_MatrixUseB> mb;
    coopMatLoadTensorNV(ma, a, 0, sliceTensorLayoutNV(layout_a, brow, BM, k, BK));
    coopMatLoadTensorNV(mb, bt, 0, sliceTensorLayoutNV(layout_b, bcol, BN, k, BK), transpose_b);
    acc = coopMatMulAdd(ma, mb, acc);
  }
#endif
#if DIAG == 3
  if (p.M != 0u) {
    return;  // never stores: M > 0 always
  }
#endif
#if EPILOGUE == 0
  coopMatStoreTensorNV(acc, c, 0, sliceTensorLayoutNV(layout_c, brow, BM, bcol, BN));
#else
  coopMatPerElementNV(acc, acc, requant_element, bcol);
  const coopmat<int8_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator> q =
      coopmat<int8_t, gl_ScopeWorkgroup, BM, BN, gl_MatrixUseAccumulator>(acc);
  coopMatStoreTensorNV(q, out_bytes, 0, sliceTensorLayoutNV(layout_c, brow, BM, bcol, BN));
#endif
}
