#version 450
// Peak int8 tensor-core throughput through cooperative matrices (VK_NV_cooperative_matrix,
// GL_NV_integer_cooperative_matrix; Debian 12's glslang has no GL_KHR_cooperative_matrix): every subgroup keeps
// CHAINS independent int32 accumulators and runs `iterations` rounds of CHAINS multiply-adds D = A x B_j + C_j
// (M x K int8 times K x N int8, sizes from the driver's property list as specialization constants), then stores
// its accumulators (iterations * A x B_j, checked exactly by the host) into slot (subgroup % slots): every subgroup
// computes the same values, so a few slots hold the whole answer. (Adding cooperative matrices crashes
// Debian 12's glslc -O: each accumulator is stored instead.)
#include "coopmat_int8.glslh"
#include "dispatch.glslh"

#ifndef CHAINS
#define CHAINS 4
#endif

COOPMAT_SIZE_SPEC_CONSTANTS

layout(set = 0, binding = 0) writeonly buffer Out { int32_t d[]; };
// A (TM x TK, row-major) then CHAINS matrices B_j (TK x TN, column-major: rows of TK bytes, so the stride is at
// least 16 bytes for every size the driver lists), int8
layout(set = 0, binding = 1) readonly buffer Operands { int8_t operands[]; };
layout(push_constant) uniform Params { int iterations; uint slots; } p;

void main() {
  const uint subgroup = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
  icoopmatNV<8, gl_ScopeSubgroup, TM, TK> a;
  coopMatLoadNV(a, operands, 0, TK, false);
  icoopmatNV<8, gl_ScopeSubgroup, TK, TN> b[CHAINS];
  icoopmatNV<32, gl_ScopeSubgroup, TM, TN> acc[CHAINS];
  [[unroll]] for (uint j = 0; j < CHAINS; ++j) {
    coopMatLoadNV(b[j], operands, TM * TK + j * TK * TN, TK, true);
    acc[j] = icoopmatNV<32, gl_ScopeSubgroup, TM, TN>(0);
  }
  for (int i = 0; i < p.iterations; ++i) {
    [[unroll]] for (uint j = 0; j < CHAINS; ++j) {
      acc[j] = coopMatMulAddNV(a, b[j], acc[j]);
    }
  }
  const uint slot = subgroup % p.slots;
  [[unroll]] for (uint j = 0; j < CHAINS; ++j) {
    coopMatStoreNV(acc[j], d, (slot * CHAINS + j) * TM * TN, TN, false);
  }
}
