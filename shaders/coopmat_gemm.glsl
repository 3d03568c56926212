#version 450
// The pointwise conv as an int8 GEMM on cooperative matrices: C (M x N, int32) = A (M x K, int8) x B (K x N, int8),
// M = N·H·W pixels, K = Cin, N = Cout; A is the activation channels-last (NHWC: one pixel's channels contiguous),
// B the weight transposed (Cin x Cout); row-major, rows 16-byte aligned (K, N multiples of 16). C is the int32
// accumulator tensor (N·H·W x Cout), what torch._int_mm returns for the same GEMM.
// Every subgroup computes RM x RN tiles of TM x TN outputs per K step of TK. SHMEM = 0: each subgroup loads its A
// and B tiles straight from memory (16-byte vectors; the caches serve the reuse across subgroups). SHMEM = 1: the
// workgroup's 4 subgroups form 2 x 2, its 128 threads stage the (2·RM·TM) x TK block of A and the TK x (2·RN·TN)
// block of B in shared memory with 16-byte loads, and every subgroup loads its tiles from there (each A and B
// tile serves two subgroups); M and N are then padded to whole workgroup blocks.
// B_COL = 1 (SHMEM = 0 only): B is given as its transpose (N x K row-major) and loaded column-major, the K-contiguous
// layout the int8 MMA takes for B; the row-major B of the default must be transposed byte-wise on its way in.
#include "coopmat_int8.glslh"
#include "dispatch.glslh"

#ifndef RM
#define RM 2
#endif
#ifndef RN
#define RN 2
#endif
#ifndef SHMEM
#define SHMEM 0
#endif
#ifndef B_COL
#define B_COL 0
#endif
#if B_COL && SHMEM
#error "B_COL is for SHMEM = 0"
#endif

COOPMAT_SIZE_SPEC_CONSTANTS

layout(set = 0, binding = 0) writeonly buffer C { int32_t c[]; };
layout(set = 0, binding = 1) readonly buffer A { uvec4 a[]; };
layout(set = 0, binding = 2) readonly buffer B { uvec4 b[]; };
layout(push_constant) uniform Params { uint M; uint N; uint K; } p;

#if SHMEM
const uint BM = 2 * RM * TM;  // the workgroup's block of C: BM x BN
const uint BN = 2 * RN * TN;
shared uvec4 sa[BM * TK / 16];  // A block, row-major, TK bytes a row
shared uvec4 sb[TK * BN / 16];  // B block, row-major, BN bytes a row
#endif

void main() {
#if SHMEM
  const uint blocks_n = p.N / BN;
  const uint block_row0 = (gl_WorkGroupID.x / blocks_n) * BM;
  const uint block_col0 = (gl_WorkGroupID.x % blocks_n) * BN;
  const uint row0 = block_row0 + (gl_SubgroupID / 2) * RM * TM;
  const uint col0 = block_col0 + (gl_SubgroupID % 2) * RN * TN;
  const uint threads = gl_WorkGroupSize.x;
#else
  const uint subgroup = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
  const uint tiles_n = p.N / (TN * RN);
  const uint row0 = (subgroup / tiles_n) * TM * RM;
  const uint col0 = (subgroup % tiles_n) * TN * RN;
  if (row0 >= p.M) {
    return;  // uniform per subgroup
  }
#endif
  COOPMAT_ACC_ZERO
  for (uint k = 0; k < p.K; k += TK) {
    icoopmatNV<8, gl_ScopeSubgroup, TM, TK> ma[RM];
    icoopmatNV<8, gl_ScopeSubgroup, TK, TN> mb[RN];
#if SHMEM
    barrier();  // every subgroup is done with the previous blocks
    for (uint i = gl_LocalInvocationIndex; i < BM * TK / 16; i += threads) {
      const uint r = i / (TK / 16);
      sa[i] = a[((block_row0 + r) * p.K + k) / 16 + i % (TK / 16)];
    }
    for (uint i = gl_LocalInvocationIndex; i < TK * BN / 16; i += threads) {
      const uint r = i / (BN / 16);
      sb[i] = b[((k + r) * p.N + block_col0) / 16 + i % (BN / 16)];
    }
    barrier();
    [[unroll]] for (uint i = 0; i < RM; ++i) {
      coopMatLoadNV(ma[i], sa, ((row0 - block_row0 + i * TM) * TK) / 16, TK / 16, false);
    }
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      coopMatLoadNV(mb[j], sb, (col0 - block_col0 + j * TN) / 16, BN / 16, false);
    }
#else
    [[unroll]] for (uint i = 0; i < RM; ++i) {
      coopMatLoadNV(ma[i], a, ((row0 + i * TM) * p.K + k) / 16, p.K / 16, false);
    }
    [[unroll]] for (uint j = 0; j < RN; ++j) {
#if B_COL
      coopMatLoadNV(mb[j], b, ((col0 + j * TN) * p.K + k) / 16, p.K / 16, true);
#else
      coopMatLoadNV(mb[j], b, (k * p.N + col0 + j * TN) / 16, p.N / 16, false);
#endif
    }
#endif
    COOPMAT_MMAS(ma, mb)
  }
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      coopMatStoreNV(acc[i][j], c, (row0 + i * TM) * p.N + col0 + j * TN, p.N, false);
    }
  }
}
