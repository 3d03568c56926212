#version 450
// Device-to-device copy, one uvec4 (16 B) per thread: the memory roofline every kernel is compared with.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

layout(set = 0, binding = 0) writeonly buffer Dst { uvec4 dst[]; };
layout(set = 0, binding = 1) readonly buffer Src { uvec4 src[]; };
layout(push_constant) uniform Params { uint num_vec4; } params;

void main() {
  // 2-D dispatch: x covers up to maxComputeWorkGroupCount.x groups, y the rest (large buffers).
  const uint i = gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x) + gl_GlobalInvocationID.x;
  if (i < params.num_vec4) {
    dst[i] = src[i];
  }
}
