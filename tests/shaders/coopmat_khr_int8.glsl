#version 450
// C (M x N, int32) = A (M x K, int8, row major) * B (K x N, int8, row major) with GL_KHR_cooperative_matrix: one
// subgroup per 16 x 16 tile of C, K in steps of 32 (VK_KHR_cooperative_matrix's usual int8 shape 16 x 16 x 32).
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require

layout(local_size_x_id = 0) in;  // one subgroup
const uint TM = 16, TN = 16, TK = 32;
layout(set = 0, binding = 0) writeonly buffer C { int32_t c[]; };
layout(set = 0, binding = 1) readonly buffer A { int8_t a[]; };
layout(set = 0, binding = 2) readonly buffer B { int8_t b[]; };
layout(push_constant) uniform Shape { uint M, N, K; } shape;

void main() {
  const uint tile_m = gl_WorkGroupID.y * TM, tile_n = gl_WorkGroupID.x * TN;
  coopmat<int32_t, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc =
      coopmat<int32_t, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0);
  for (uint k = 0; k < shape.K; k += TK) {
    coopmat<int8_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> ma;
    coopmat<int8_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> mb;
    coopMatLoad(ma, a, tile_m * shape.K + k, shape.K, gl_CooperativeMatrixLayoutRowMajor);
    coopMatLoad(mb, b, k * shape.N + tile_n, shape.N, gl_CooperativeMatrixLayoutRowMajor);
    acc = coopMatMulAdd(ma, mb, acc);
  }
  coopMatStore(acc, c, tile_m * shape.N + tile_n, shape.N, gl_CooperativeMatrixLayoutRowMajor);
}
