#version 450
// Device-to-device copy, one uvec4 (16 B) per thread: the memory roofline every kernel is compared with.
#include "dispatch.glslh"

layout(set = 0, binding = 0) writeonly buffer Dst { uvec4 dst[]; };
layout(set = 0, binding = 1) readonly buffer Src { uvec4 src[]; };
layout(push_constant) uniform Params { uint num_vec4; } params;

void main() {
  const uint i = dispatch_index();  // 2-D dispatch for large buffers
  if (i < params.num_vec4) {
    dst[i] = src[i];
  }
}
