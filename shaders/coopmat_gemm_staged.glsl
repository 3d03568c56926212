#version 450
// The pointwise conv as an int8 GEMM on cooperative matrices, staged through shared memory in two buffers:
// C (M x N, int32) = A (M x K, int8) x B (K x N, int8), A the activation channels-last (NHWC), B given as its
// transpose Bt (N x K row-major: the conv weight [Cout, Cin] as torch holds it), so both operands are loaded
// K-contiguous, which is the layout the int8 MMA instructions take (A "row", B "col"); a row-major int8 B must be
// transposed byte-wise on its way in.
//
// A workgroup of WM x WN subgroups owns a BM x BN block of C (BM = WM·RM·TM, BN = WN·RN·TN); each subgroup RM x RN
// tiles of TM x TN. K advances BK = KSTEPS·TK bytes per stage: every thread loads its share of the next stage's A and
// Bt blocks into registers (16-byte loads, coalesced), the subgroups multiply the current stage out of shared memory,
// then the registers go to the other shared buffer and one barrier ends the stage (the barrier of stage s also
// guarantees that nobody still reads the buffer stage s + 1 overwrites). With PAD = 1 staged rows carry 16 bytes of
// padding, so the 8 rows a 16-byte-per-lane fragment load touches start in different banks; PAD = 0 saves that
// shared memory (a third of it at BK = 32).
// STAGES = 3: a ring of three shared buffers and two register sets, so each stage's global loads are issued two
// stages ahead and have a whole stage of MMAs to arrive (with two buffers they have only the current stage's).
// EPILOGUE = 1: the pointwise conv's own epilogue instead of int32 C: per output channel the zero-point correction,
// scale, bias and requantization of q8ta_conv2d_pw.glsl (same fp32 operations in the same order), written as int8
// NHWC (4 channels a word: ET-VK's 4C layout, which A already is). Each subgroup stores one row of its tiles (TM x
// RN·TN int32) into its own shared region, its lanes requantize it (every lane keeps 4 channels: their parameters
// are read once) and write whole words. The passes are unrolled by the preprocessor: spirv-opt's unroller would drop
// the `precise` decorations on its copies and let the multiply and add fuse.
// The host pads M, N, K to whole blocks and checks that the thread count divides both blocks' 16-byte chunks.
// DIAG (diagnostic builds, WRONG results by design, to split the time): 1 = every stage multiplies what the two
// shared buffers hold after the prologue (no global loads, shared stores or barriers in the loop: fragment loads
// from shared memory and MMAs alone); 2 = the fragments of the first step are loaded once and every step multiplies them again (MMAs
// alone, plus the same prologue and stores of C); 3 = as 2 without storing C (the store is kept behind a condition
// that never holds at run time, so the MMAs are not removed).
#include "coopmat_int8.glslh"
#include "coopmat_tiles.glslh"

#ifndef DIAG
#define DIAG 0
#endif
#ifndef EPILOGUE
#define EPILOGUE 0
#endif

#ifndef PAD
#define PAD 1
#endif
#ifndef STAGES
#define STAGES 2
#endif
#if STAGES != 2 && STAGES != 3
#error "STAGES is 2 or 3"
#endif
#if STAGES == 3 && DIAG
#error "the diagnostic builds are two-stage"
#endif
const uint ROW = CHUNKS + PAD;                 // uvec4 per staged row; PAD = 1: one of padding
const uint THREADS = WM * WN * 32;
const uint A_PER = BM * CHUNKS / THREADS;      // chunks each thread moves per stage
const uint B_PER = BN * CHUNKS / THREADS;

layout(local_size_x = THREADS, local_size_y = 1, local_size_z = 1) in;

#if EPILOGUE
layout(set = 0, binding = 0) writeonly buffer Out { int out_words[]; };  // int8 NHWC (4C), M x N / 4 words
#else
layout(set = 0, binding = 0) writeonly buffer C { int32_t c[]; };
#endif
layout(set = 0, binding = 1) readonly buffer A { uvec4 a[]; };
layout(set = 0, binding = 2) readonly buffer Bt { uvec4 bt[]; };
#if EPILOGUE
layout(set = 0, binding = 3) readonly buffer WeightSums { int weight_sums[]; };    // per output channel, padded
layout(set = 0, binding = 4) readonly buffer WeightScales { float weight_scales[]; };
layout(set = 0, binding = 5) readonly buffer Bias { float bias[]; };
layout(push_constant) uniform Params {
  uint M; uint N; uint K;
  float input_scale; int input_zp; float output_inv_scale; int output_zp; int apply_bias; int relu;
} p;
#else
layout(push_constant) uniform Params { uint M; uint N; uint K; } p;
#endif

shared uvec4 sa[STAGES * BM * ROW];
shared uvec4 sb[STAGES * BN * ROW];
#if EPILOGUE
#include "int8x4.glslh"
#include "conv_requant.glslh"

const uint COLS4 = RN * TN / 4;         // uvec4 (4 int32 channels) per row of a subgroup's tile row
const uint PITCH = COLS4 + 1;           // one uvec4 of padding a row: the tile stores' rows start in other banks
const uint REGION = TM * PITCH;         // uvec4 of one subgroup's region
// The regions live in the staging buffers, free after the K loop (a shared array of their own would raise the
// workgroup's shared memory, and on an H200 a 41 KB workgroup ran its K loop at 60 % of the 24 KB one's speed):
// the first half of the subgroups in sa, the rest in sb.
const uint HALF = WM * WN / 2;


#endif

void main() {
  const uint blocks_n = p.N / BN;
  const uint brow = (gl_WorkGroupID.x / blocks_n) * BM;
  const uint bcol = (gl_WorkGroupID.x % blocks_n) * BN;
  const uint srow = (gl_SubgroupID / WN) * RM * TM;  // the subgroup's tiles inside the block
  const uint scol = (gl_SubgroupID % WN) * RN * TN;
  const uint tid = gl_LocalInvocationIndex;
  const uint row_chunks = p.K / 16;
  const uint stages = p.K / BK;

  COOPMAT_ACC_ZERO

#if STAGES == 3
#define LOAD_STAGE(RA, RB, ST)                                                                    \
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {                                                   \
    const uint q = tid + i * THREADS;                                                             \
    RA[i] = a[(brow + q / CHUNKS) * row_chunks + (ST) * CHUNKS + q % CHUNKS];                     \
  }                                                                                               \
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {                                                   \
    const uint q = tid + i * THREADS;                                                             \
    RB[i] = bt[(bcol + q / CHUNKS) * row_chunks + (ST) * CHUNKS + q % CHUNKS];                    \
  }
#define STORE_STAGE(RA, RB, BUF)                                                                  \
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {                                                   \
    const uint q = tid + i * THREADS;                                                             \
    sa[((BUF) * BM + q / CHUNKS) * ROW + q % CHUNKS] = RA[i];                                     \
  }                                                                                               \
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {                                                   \
    const uint q = tid + i * THREADS;                                                             \
    sb[((BUF) * BN + q / CHUNKS) * ROW + q % CHUNKS] = RB[i];                                     \
  }
#define COMPUTE(BUF) COOPMAT_STAGE_MMAS(sa, sb, 0u, BUF)
  // register set 0 takes the even stages, set 1 the odd ones; buffer of stage t: t % 3
  uvec4 ra0[A_PER], rb0[B_PER], ra1[A_PER], rb1[B_PER];
  LOAD_STAGE(ra0, rb0, 0u)
  STORE_STAGE(ra0, rb0, 0u)
  if (stages > 1) {
    LOAD_STAGE(ra1, rb1, 1u)
  }
  barrier();
  for (uint s = 0; s < stages; s += 2) {  // two stages an iteration: the register sets swap roles
    if (s + 2 < stages) {
      LOAD_STAGE(ra0, rb0, s + 2)
    }
    COMPUTE(s % 3)
    if (s + 1 < stages) {
      STORE_STAGE(ra1, rb1, (s + 1) % 3)
    }
    barrier();
    if (s + 1 >= stages) {
      break;  // uniform
    }
    if (s + 3 < stages) {
      LOAD_STAGE(ra1, rb1, s + 3)
    }
    COMPUTE((s + 1) % 3)
    if (s + 2 < stages) {
      STORE_STAGE(ra0, rb0, (s + 2) % 3)
    }
    barrier();
  }
#else
  uvec4 ra[A_PER];
  uvec4 rb[B_PER];
  // chunk q of a block: row q / CHUNKS, chunk q % CHUNKS; neighbouring threads take neighbouring chunks
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {
    const uint q = tid + i * THREADS;
    ra[i] = a[(brow + q / CHUNKS) * row_chunks + q % CHUNKS];
  }
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {
    const uint q = tid + i * THREADS;
    rb[i] = bt[(bcol + q / CHUNKS) * row_chunks + q % CHUNKS];
  }
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {
    const uint q = tid + i * THREADS;
    sa[(q / CHUNKS) * ROW + q % CHUNKS] = ra[i];
  }
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {
    const uint q = tid + i * THREADS;
    sb[(q / CHUNKS) * ROW + q % CHUNKS] = rb[i];
  }
  barrier();

#if DIAG >= 2
  icoopmatNV<8, gl_ScopeSubgroup, TM, TK> fa[RM];
  icoopmatNV<8, gl_ScopeSubgroup, TK, TN> fb[RN];
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    coopMatLoadNV(fa[i], sa, (srow + i * TM) * ROW, ROW, false);
  }
  [[unroll]] for (uint j = 0; j < RN; ++j) {
    coopMatLoadNV(fb[j], sb, (scol + j * TN) * ROW, ROW, true);
  }
#endif
  for (uint s = 0; s < stages; ++s) {
#if DIAG
    const uint buf = s & 1u;  // still varies, so the fragment loads cannot be hoisted out of the loop
    const bool more = false;
#else
    const uint buf = s & 1u;
    const bool more = s + 1 < stages;  // uniform
#endif
    if (more) {
      const uint k0 = (s + 1) * CHUNKS;
      [[unroll]] for (uint i = 0; i < A_PER; ++i) {
        const uint q = tid + i * THREADS;
        ra[i] = a[(brow + q / CHUNKS) * row_chunks + k0 + q % CHUNKS];
      }
      [[unroll]] for (uint i = 0; i < B_PER; ++i) {
        const uint q = tid + i * THREADS;
        rb[i] = bt[(bcol + q / CHUNKS) * row_chunks + k0 + q % CHUNKS];
      }
    }
#if DIAG >= 2
    [[unroll]] for (uint ks = 0; ks < KSTEPS; ++ks) {
      COOPMAT_MMAS(fa, fb)
    }
#else
    COOPMAT_STAGE_MMAS(sa, sb, 0u, buf)
#endif
    if (more) {
      const uint other = buf ^ 1u;
      [[unroll]] for (uint i = 0; i < A_PER; ++i) {
        const uint q = tid + i * THREADS;
        sa[(other * BM + q / CHUNKS) * ROW + q % CHUNKS] = ra[i];
      }
      [[unroll]] for (uint i = 0; i < B_PER; ++i) {
        const uint q = tid + i * THREADS;
        sb[(other * BN + q / CHUNKS) * ROW + q % CHUNKS] = rb[i];
      }
    }
#if DIAG == 0
    barrier();
#endif
  }
#endif  // STAGES

#if DIAG == 3
  if (p.M != 0u) {
    return;  // never stores: M > 0 always
  }
#endif
#if EPILOGUE
  // the loop's last barrier: every subgroup is past its last shared read; the regions are the subgroups' own
  const bool in_a = gl_SubgroupID < HALF;  // uniform per subgroup
  const uint region = (gl_SubgroupID % HALF) * REGION;
  const uint lane = gl_SubgroupInvocationID;
  const uint col4 = lane % COLS4;     // this lane's 4 channels, the same in every pass
  const uint ch = bcol + scol + 4 * col4;
  const ivec4 sums = ivec4(weight_sums[ch], weight_sums[ch + 1], weight_sums[ch + 2], weight_sums[ch + 3]);
  const vec4 scale = vec4(weight_scales[ch], weight_scales[ch + 1], weight_scales[ch + 2],
                          weight_scales[ch + 3]) * p.input_scale;
  const vec4 b = vec4(bias[ch], bias[ch + 1], bias[ch + 2], bias[ch + 3]);
#define EPI_PASS(I)                                                                                \
  [[unroll]] for (uint j = 0; j < RN; ++j) {                                                      \
    if (in_a) {                                                                                   \
      coopMatStoreNV(acc[I][j], sa, region + j * (TN / 4), PITCH, false);                         \
    } else {                                                                                      \
      coopMatStoreNV(acc[I][j], sb, region + j * (TN / 4), PITCH, false);                         \
    }                                                                                             \
  }                                                                                               \
  subgroupMemoryBarrierShared();                                                                  \
  subgroupBarrier();                                                                              \
  [[dont_unroll]] for (uint r = lane / COLS4; r < TM; r += 32 / COLS4) {                          \
    const uint row = brow + srow + (I) * TM + r;                                                  \
    const uvec4 v = in_a ? sa[region + r * PITCH + col4] : sb[region + r * PITCH + col4];        \
    out_words[(row * p.N + ch) / 4] = conv_requantize4(ivec4(v), sums, scale, b);                      \
  }                                                                                               \
  subgroupBarrier();
  EPI_PASS(0)
#if RM >= 2
  EPI_PASS(1)
#endif
#if RM >= 4
  EPI_PASS(2)
  EPI_PASS(3)
#endif
#else
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      coopMatStoreNV(acc[i][j], c, (brow + srow + i * TM) * p.N + bcol + scol + j * TN, p.N, false);
    }
  }
#endif
}
