#version 450
// The pointwise conv as an int8 GEMM on cooperative matrices, second generation (issue 25): the staged kernel of
// coopmat_gemm_staged.glsl (A = activation NHWC, Bt = weight [Cout, Cin], both K-contiguous; WM x WN subgroups of
// RM x RN tiles; BK = KSTEPS·TK bytes of K a stage) with three changes, each a compile-time choice so one run can
// measure each step:
//
// STAGES = S (2..4): S - 1 register sets of global loads in flight. At stage s each thread issues the loads of stage
// s + S - 1 into register set s % (S - 1), multiplies stage s out of shared buffer s % 2, then stores the register set
// holding stage s + 1 into the other buffer; one barrier ends the stage. Loads get S - 1 stages of MMAs to arrive
// while shared memory stays two buffers (more shared memory per workgroup ran slower on the H200). The stage loop is
// unrolled S - 1 times so every register set is indexed by a constant.
//
// Split-K: push constant `splits` = P; workgroup row y = slice z multiplies stages [z·ceil(T/P), ...) of the T = K / BK
// stages and writes its int32 partial sums to C + z·M·N (an empty slice writes zeros); coopmat_splitk_reduce.glsl adds
// the P slices and requantizes. P = 1 with EPILOGUE = 0 is the plain int32 GEMM.
//
// EPILOGUE: 0 = int32 C (the GEMM, or split-K partials); 2 = "direct": each accumulator is requantized in registers
// (per element: the element's output channel comes from a coordinate matrix, loaded once from a shared table of
// r·TN + c, which is laid out like every matrix of the type), converted to an int8 matrix and stored straight to the
// int8 NHWC output with coopMatStoreNV; 3 = "sectors": as 2, but the int8 tiles of the subgroup go into its own
// region of the (then free) staging memory and its lanes write them back as 16-byte stores, RN·TN-byte runs of one
// pixel (whole 32-byte sectors); no workgroup barrier, no int32 through shared memory. The requantization is the
// fp32 order of q8ta_conv2d_pw.glsl, unrolled by the preprocessor (spirv-opt's unroller drops `precise`).
//
// DIAG (diagnostic builds, WRONG results by design): 1 = no global loads, shared stores or barriers in the loop;
// 2 = the fragments of the first step multiplied again every step (MMAs alone); 3 = as 2 with no output at all (the
// store behind a condition that never holds). The epilogue stays in for 1 and 2.
// Operand-load options (issue 35), each a define so one run measures each step:
// PAD = 0..3: uvec4 of padding per staged row (the row stride in shared memory, against bank conflicts; coopMatLoadNV
// reads strided rows, so padding, not an XOR swizzle, is the layout it can take).
// VEC = 1 / 2 / 4: 16-byte chunks a thread loads from one row, contiguous (VEC = 1: consecutive lanes take
// consecutive chunks; 2 / 4: each lane 32 / 64 contiguous bytes, fewer address computations per byte).
// FRAGS = 1 / 2: fragment sets from shared memory; 2 = the next K step's fragments are loaded into registers while
// the current step's MMAs run (needs KSTEPS >= 2 to differ from 1).
// The host pads M, N, K to whole blocks and checks that the thread count divides both blocks' 16-byte chunks.
#include "coopmat_int8.glslh"
#include "coopmat_tiles.glslh"

#ifndef STAGES
#define STAGES 3
#endif
#ifndef PAD
#define PAD 0
#endif
#ifndef EPILOGUE
#define EPILOGUE 3
#endif
#ifndef DIAG
#define DIAG 0
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef FRAGS
#define FRAGS 1
#endif
#if FRAGS != 1 && FRAGS != 2
#error "FRAGS is 1 or 2"
#endif
#if STAGES < 2 || STAGES > 4
#error "STAGES is 2, 3 or 4"
#endif
#if EPILOGUE != 0 && EPILOGUE != 2 && EPILOGUE != 3
#error "EPILOGUE is 0, 2 or 3"
#endif
#if EPILOGUE == 3 && TN != 16
#error "the sectors epilogue stores 16-byte columns of int8 tiles: TN = 16"
#endif

const uint ROW = CHUNKS + PAD;
const uint THREADS = WM * WN * 32;
const uint A_PER = BM * CHUNKS / THREADS;
const uint B_PER = BN * CHUNKS / THREADS;
const uint SETS = STAGES - 1;
// 16-byte chunk q of a block for a thread's i-th load: VEC contiguous chunks per thread, threads side by side
#define CHUNK_OF(I) ((tid + ((I) / VEC) * THREADS) * VEC + (I) % VEC)
const uint SB0 = 2 * BM * ROW;                     // Bt's staging buffers after A's
const uint STAGING = 2 * (BM + BN) * ROW;
const uint TILE16 = RM * TM * RN * TN / 16;        // uvec4 of one subgroup's int8 tile (the sectors epilogue)
const uint SHARED = (EPILOGUE == 3 && WM * WN * TILE16 > STAGING) ? WM * WN * TILE16 : STAGING;

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

#if EPILOGUE == 0
layout(set = 0, binding = 0) writeonly buffer C { int32_t c[]; };
#elif EPILOGUE == 2
layout(set = 0, binding = 0) writeonly buffer Out { uint out_words[]; };   // int8 NHWC (4C), M x N / 4 words
#else
layout(set = 0, binding = 0) writeonly buffer Out { uvec4 out_vec[]; };    // int8 NHWC (4C), M x N / 16 uvec4
#endif
#include "coopmat_conv_io.glslh"

shared uvec4 stage_mem[SHARED];  // A's two buffers, then Bt's; the sectors epilogue's regions afterwards
#if EPILOGUE
shared int coords[TM * TN];      // r·TN + c at (r, c): the element -> coordinate map of the accumulator type

// One int8 output: conv_requant.glslh (q8ta_conv2d_pw.glsl's requantize, fp32 operations in the same order).
#include "int8x4.glslh"
#include "conv_requant.glslh"

// Preprocessor loops over i < RM, j < RN and the lane's elements e < TM·TN / 32 (no spirv-opt unrolling: `precise`)
#if RM == 1
#define FOR_I(X, J, E) X(0, J, E)
#elif RM == 2
#define FOR_I(X, J, E) X(0, J, E) X(1, J, E)
#else
#define FOR_I(X, J, E) X(0, J, E) X(1, J, E) X(2, J, E) X(3, J, E)
#endif
#if TM * TN / 32 == 4
#define FOR_E(X, J) X(J, 0) X(J, 1) X(J, 2) X(J, 3)
#else
#define FOR_E(X, J) X(J, 0) X(J, 1) X(J, 2) X(J, 3) X(J, 4) X(J, 5) X(J, 6) X(J, 7)
#endif
#if RN == 1
#define FOR_J(X) X(0)
#elif RN == 2
#define FOR_J(X) X(0) X(1)
#else
#define FOR_J(X) X(0) X(1) X(2) X(3)
#endif
#define REQ_I(I, J, E) acc[I][J][E] = conv_requantize1(acc[I][J][E], sum_, scale_, bias_);
#define REQ_E(J, E)                                                                               \
  {                                                                                               \
    const uint ch_ = ch0 + (J) * TN + (uint(where[E]) % TN);                                      \
    const int sum_ = weight_sums[ch_];                                                            \
    const float scale_ = weight_scales[ch_] * p.input_scale;                                      \
    const float bias_ = bias[ch_];                                                                \
    FOR_I(REQ_I, J, E)                                                                            \
  }
#define REQ_J(J) FOR_E(REQ_E, J)
#endif

void main() {
  const uint blocks_n = p.N / BN;
  const uint brow = (gl_WorkGroupID.x / blocks_n) * BM;
  const uint bcol = (gl_WorkGroupID.x % blocks_n) * BN;
  const uint srow = (gl_SubgroupID / WN) * RM * TM;
  const uint scol = (gl_SubgroupID % WN) * RN * TN;
  const uint tid = gl_LocalInvocationIndex;
  const uint row_chunks = p.K / 16;
  const uint total = p.K / BK;
  const uint per = (total + p.splits - 1u) / p.splits;
  const uint first = min(gl_WorkGroupID.y * per, total);
  const uint stages = min(first + per, total) - first;  // this slice's stages (uniform; 0 for an empty slice)

  COOPMAT_ACC_ZERO
#if EPILOGUE
  for (uint i = tid; i < TM * TN; i += THREADS) {
    coords[i] = int(i);
  }
#endif

#define LOAD(SET, ST)                                                                             \
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {                                                   \
    const uint q = CHUNK_OF(i);                                                                   \
    ra[SET][i] = a[(brow + q / CHUNKS) * row_chunks + (first + (ST)) * CHUNKS + q % CHUNKS];      \
  }                                                                                               \
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {                                                   \
    const uint q = CHUNK_OF(i);                                                                   \
    rb[SET][i] = bt[(bcol + q / CHUNKS) * row_chunks + (first + (ST)) * CHUNKS + q % CHUNKS];     \
  }
#define STORE(SET, BUF)                                                                           \
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {                                                   \
    const uint q = CHUNK_OF(i);                                                                   \
    stage_mem[((BUF) * BM + q / CHUNKS) * ROW + q % CHUNKS] = ra[SET][i];                         \
  }                                                                                               \
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {                                                   \
    const uint q = CHUNK_OF(i);                                                                   \
    stage_mem[SB0 + ((BUF) * BN + q / CHUNKS) * ROW + q % CHUNKS] = rb[SET][i];                   \
  }
#if DIAG >= 2
#define COMPUTE(BUF)                                                                              \
  [[unroll]] for (uint ks = 0; ks < KSTEPS; ++ks) {                                               \
    COOPMAT_MMAS(fa, fb)                                                                          \
  }
#elif FRAGS == 2
// the fragments of step ks + 1 are loaded (set (ks + 1) % 2) before the MMAs of step ks (set ks % 2)
#define FRAG_LOAD(SET, KS, BUF)                                                                   \
  [[unroll]] for (uint i = 0; i < RM; ++i) {                                                      \
    coopMatLoadNV(ma[SET][i], stage_mem, ((BUF) * BM + srow + i * TM) * ROW + (KS) * (TK / 16), ROW, false); \
  }                                                                                               \
  [[unroll]] for (uint j = 0; j < RN; ++j) {                                                      \
    coopMatLoadNV(mb[SET][j], stage_mem, SB0 + ((BUF) * BN + scol + j * TN) * ROW + (KS) * (TK / 16), ROW, true); \
  }
#define COMPUTE(BUF)                                                                              \
  {                                                                                               \
    icoopmatNV<8, gl_ScopeSubgroup, TM, TK> ma[2][RM];                                            \
    icoopmatNV<8, gl_ScopeSubgroup, TK, TN> mb[2][RN];                                            \
    FRAG_LOAD(0, 0u, BUF)                                                                         \
    [[unroll]] for (uint ks = 0; ks < KSTEPS; ++ks) {                                             \
      if (ks + 1 < KSTEPS) {                                                                      \
        FRAG_LOAD((ks + 1) & 1u, ks + 1, BUF)                                                     \
      }                                                                                           \
      COOPMAT_MMAS(ma[ks & 1u], mb[ks & 1u])                                                      \
    }                                                                                             \
  }
#else
#define COMPUTE(BUF) COOPMAT_STAGE_MMAS(stage_mem, stage_mem, SB0, BUF)
#endif

  uvec4 ra[SETS][A_PER];
  uvec4 rb[SETS][B_PER];
  // prologue: stage 0 into buffer 0, stages 1 .. S - 2 into register sets 1 .. S - 2
  if (stages > 0) {
    LOAD(0, 0u)
    STORE(0, 0u)
  }
#if STAGES >= 3
  if (1u < stages) {
    LOAD(1, 1u)
  }
#endif
#if STAGES >= 4
  if (2u < stages) {
    LOAD(2, 2u)
  }
#endif
  barrier();
#if DIAG >= 2
  icoopmatNV<8, gl_ScopeSubgroup, TM, TK> fa[RM];
  icoopmatNV<8, gl_ScopeSubgroup, TK, TN> fb[RN];
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    coopMatLoadNV(fa[i], stage_mem, (srow + i * TM) * ROW, ROW, false);
  }
  [[unroll]] for (uint j = 0; j < RN; ++j) {
    coopMatLoadNV(fb[j], stage_mem, SB0 + (scol + j * TN) * ROW, ROW, true);
  }
#endif
  // invariant at stage s (position PH = s % SETS): register set PH held stage s, already in buffer s % 2. The stage
  // loop is unrolled SETS times by the preprocessor, so register sets are indexed by constants.
#if DIAG == 0
#define STEP(PH)                                                                                  \
  {                                                                                               \
    const uint s = s0 + (PH);                                                                     \
    if (s < stages) { /* uniform */                                                               \
      if (s + SETS < stages) {                                                                    \
        LOAD(PH, s + SETS)                                                                        \
      }                                                                                           \
      COMPUTE(s & 1u)                                                                             \
      if (s + 1 < stages) {                                                                       \
        STORE(((PH) + 1) % SETS, (s + 1) & 1u)                                                    \
      }                                                                                           \
      barrier();                                                                                  \
    }                                                                                             \
  }
#else
#define STEP(PH)                                                                                  \
  {                                                                                               \
    const uint s = s0 + (PH);                                                                     \
    if (s < stages) {                                                                             \
      COMPUTE(s & 1u)                                                                             \
    }                                                                                             \
  }
#endif
  for (uint s0 = 0; s0 < stages; s0 += SETS) {
    STEP(0)
#if STAGES >= 3
    STEP(1)
#endif
#if STAGES >= 4
    STEP(2)
#endif
  }

#if DIAG == 3
  if (p.M != 0u) {
    return;  // never stores: M > 0 always
  }
#endif
#if EPILOGUE == 0
  const uint slice = gl_WorkGroupID.y * p.M * p.N;
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      coopMatStoreNV(acc[i][j], c, slice + (brow + srow + i * TM) * p.N + bcol + scol + j * TN, p.N, false);
    }
  }
#else
  icoopmatNV<32, gl_ScopeSubgroup, TM, TN> where;
  coopMatLoadNV(where, coords, 0, TN, false);
  const uint ch0 = bcol + scol;
  FOR_J(REQ_J)
#if EPILOGUE == 2
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      const icoopmatNV<8, gl_ScopeSubgroup, TM, TN> q = icoopmatNV<8, gl_ScopeSubgroup, TM, TN>(acc[i][j]);
      coopMatStoreNV(q, out_words, ((brow + srow + i * TM) * p.N + ch0 + j * TN) / 4, p.N / 4, false);
    }
  }
#else
  // the loop's last barrier: every subgroup is past its last staging read; the region is this subgroup's own
  const uint region = gl_SubgroupID * TILE16;
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      const icoopmatNV<8, gl_ScopeSubgroup, TM, TN> q = icoopmatNV<8, gl_ScopeSubgroup, TM, TN>(acc[i][j]);
      coopMatStoreNV(q, stage_mem, region + i * TM * RN + j, RN, false);  // rows of RN uvec4
    }
  }
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  [[unroll]] for (uint t = gl_SubgroupInvocationID; t < TILE16; t += 32) {
    const uint row = brow + srow + t / RN;
    out_vec[(row * p.N + ch0) / 16 + t % RN] = stage_mem[region + t];
  }
#endif
#endif
}
