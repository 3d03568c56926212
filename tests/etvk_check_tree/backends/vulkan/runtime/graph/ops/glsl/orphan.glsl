#version 450 core
// Written here for the check's tests: nothing in the C++ requests this template.
layout(std430) buffer;
layout(set = 0, binding = 0) buffer restrict writeonly Out { uint t_out[]; };
layout(set = 0, binding = 1) buffer restrict readonly In { uint t_in[]; };
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
void main() {
  t_out[gl_GlobalInvocationID.x] = t_in[gl_GlobalInvocationID.x];
}
