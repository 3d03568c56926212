#version 450
// out[i] = (saturate(acc[i] + dot4x8(a[i], b[i])), dot4x8(a[i], b[i])) through GL_EXT_integer_dot_product, which
// only the included header enables.
#include "int8_dot_ext.glslh"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Out { ivec2 out_values[]; };
layout(set = 0, binding = 1) readonly buffer A { int a_values[]; };
layout(set = 0, binding = 2) readonly buffer B { int b_values[]; };
layout(set = 0, binding = 3) readonly buffer Acc { int acc_values[]; };
layout(push_constant) uniform Push { int n; } pc;

void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i >= pc.n) return;
  const int a = a_values[i], b = b_values[i];
  out_values[i] = ivec2(dot4x8_acc_sat_ext(a, b, acc_values[i]), dot4x8_ext(a, b));
}
