#version 450
// The pointwise conv as an int8 GEMM on cooperative matrices: C (M x N, int32) = A (M x K, int8) x B (K x N, int8),
// M = N·H·W pixels, K = Cin, N = Cout; A is the activation channels-last (NHWC: one pixel's channels contiguous),
// B the weight transposed (Cin x Cout); row-major, rows 16-byte aligned (K, N multiples of 16). C is the int32
// accumulator tensor (N·H·W x Cout), what torch._int_mm returns for the same GEMM.
// Every subgroup computes RM x RN tiles of TM x TN outputs, loading its A and B tiles straight from memory (16-byte
// vectors; the caches serve the reuse across subgroups) per K step of TK.
#extension GL_NV_cooperative_matrix : require
#extension GL_NV_integer_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require

#ifndef RM
#define RM 2
#endif
#ifndef RN
#define RN 2
#endif

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(constant_id = 3) const uint TM = 16;
layout(constant_id = 4) const uint TN = 16;
layout(constant_id = 5) const uint TK = 32;

layout(set = 0, binding = 0) writeonly buffer C { int32_t c[]; };
layout(set = 0, binding = 1) readonly buffer A { uvec4 a[]; };
layout(set = 0, binding = 2) readonly buffer B { uvec4 b[]; };
layout(push_constant) uniform Params { uint M; uint N; uint K; } p;

void main() {
  const uint subgroup = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
  const uint tiles_n = p.N / (TN * RN);
  const uint row0 = (subgroup / tiles_n) * TM * RM;
  const uint col0 = (subgroup % tiles_n) * TN * RN;
  if (row0 >= p.M) {
    return;  // uniform per subgroup
  }
  icoopmatNV<32, gl_ScopeSubgroup, TM, TN> acc[RM][RN];
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      acc[i][j] = icoopmatNV<32, gl_ScopeSubgroup, TM, TN>(0);
    }
  }
  for (uint k = 0; k < p.K; k += TK) {
    icoopmatNV<8, gl_ScopeSubgroup, TM, TK> ma[RM];
    icoopmatNV<8, gl_ScopeSubgroup, TK, TN> mb[RN];
    [[unroll]] for (uint i = 0; i < RM; ++i) {
      coopMatLoadNV(ma[i], a, ((row0 + i * TM) * p.K + k) / 16, p.K / 16, false);
    }
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      coopMatLoadNV(mb[j], b, (k * p.N + col0 + j * TN) / 16, p.N / 16, false);
    }
    [[unroll]] for (uint i = 0; i < RM; ++i) {
      [[unroll]] for (uint j = 0; j < RN; ++j) {
        acc[i][j] = coopMatMulAddNV(ma[i], mb[j], acc[i][j]);
      }
    }
  }
  [[unroll]] for (uint i = 0; i < RM; ++i) {
    [[unroll]] for (uint j = 0; j < RN; ++j) {
      coopMatStoreNV(acc[i][j], c, (row0 + i * TM) * p.N + col0 + j * TN, p.N, false);
    }
  }
}
