#version 450
// planted bug (lint check 1): invocations past n return before the barrier the others wait at
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) buffer Out { float out_data[]; };
layout(set = 0, binding = 1) buffer In { float in_data[]; };
layout(push_constant) uniform P { uint n; };
shared float tile[64];
void main() {
  uint i = gl_GlobalInvocationID.x;
  uint l = gl_LocalInvocationID.x;
  if (i >= n) return;
  tile[l] = in_data[i];
  barrier();
  out_data[i] = tile[63u - l];
}
