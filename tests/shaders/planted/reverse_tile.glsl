#version 450
// clean: bounds handled without leaving before the barrier; barrier between shared write and read
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) buffer Out { float out_data[]; };
layout(set = 0, binding = 1) buffer In { float in_data[]; };
layout(push_constant) uniform P { uint n; };
shared float tile[64];
void main() {
  uint i = gl_GlobalInvocationID.x;
  uint l = gl_LocalInvocationID.x;
  tile[l] = i < n ? in_data[i] : 0.0;
  barrier();
  uint src = gl_WorkGroupID.x * 64u + 63u - l;
  if (i < n && src < n) out_data[i] = tile[63u - l];
  else if (i < n) out_data[i] = in_data[i];
}
