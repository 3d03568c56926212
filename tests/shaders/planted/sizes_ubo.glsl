#version 450
// An interface for the push-constant / UBO range check: a 12-byte push-constant block and a 32-byte UBO (two
// ivec4s), read by the code. The planted bugs are on the C++ side: the bytes a Dispatch supplies (test_planted_bugs).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) buffer Out { int out_data[]; };
layout(set = 0, binding = 1) uniform Sizes { ivec4 sizes; ivec4 strides; };
layout(push_constant) uniform P { uint n; int bias; int scale; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < n) {
    out_data[i] = int(i) * scale + bias + sizes[i % 4u] * strides[(i + 1u) % 4u];
  }
}
