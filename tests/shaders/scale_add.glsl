#version 450
// out[i] = in[i] * MUL + add + params.offset: spec constant, push constant and UBO all change the result.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Out { int out_values[]; };
layout(set = 0, binding = 1) readonly buffer In { int in_values[]; };
layout(set = 0, binding = 2) uniform Params { int n; int offset; } params;
layout(push_constant) uniform Push { int add; } pc;
layout(constant_id = 3) const int MUL = 1;
layout(constant_id = 4) const bool NEGATE = false;
void main() {
  const int i = int(gl_GlobalInvocationID.x);
  if (i >= params.n) return;
  int v = in_values[i] * MUL + pc.add + params.offset;
  out_values[i] = NEGATE ? -v : v;
}
