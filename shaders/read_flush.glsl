#version 450
// A read-only sweep of a large buffer: what runs, untimed, before a dispatch measured cold where rotating copies of
// its inputs cannot span the last-level cache (measure.cache: tiny working sets). It fills the cache with clean
// lines (a copy would leave dirty ones for the timed dispatch to write back); the store never happens for a
// buffer of zeros, and the compiler cannot know that.
#include "dispatch.glslh"

layout(set = 0, binding = 0) writeonly buffer Sink { uint sink[]; };
layout(set = 0, binding = 1) readonly buffer Src { uvec4 src[]; };
layout(push_constant) uniform Params { uint num_vec4; } params;

void main() {
  const uint i = dispatch_index();
  if (i < params.num_vec4) {
    const uvec4 v = src[i];
    if ((v.x ^ v.y ^ v.z ^ v.w) == 0x9E3779B9u) {
      sink[0] = i;
    }
  }
}
