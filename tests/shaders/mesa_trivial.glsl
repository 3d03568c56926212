#version 450
// The smallest useful compute shader for the offline compilers' statistics tests (Adreno, Mali, AMD): out[i] = in[i] * MUL.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(std430, set = 0, binding = 0) writeonly buffer Out { int out_values[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { int in_values[]; };
layout(constant_id = 3) const int MUL = 3;
void main() {
  const int i = int(gl_GlobalInvocationID.x);
  out_values[i] = in_values[i] * MUL;
}
