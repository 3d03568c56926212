#version 450
#extension GL_EXT_debug_printf : require
// Prints one line per invocation (debugPrintfEXT; the layer's debug printf collects them) and copies src to dst.
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Dst { uint dst[]; };
layout(set = 0, binding = 1) readonly buffer Src { uint src[]; };
layout(push_constant) uniform Params { uint n; } params;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < params.n) {
    dst[i] = src[i] * 2u;
    debugPrintfEXT("i=%u src=%u dst=%u", i, src[i], src[i] * 2u);
  }
}
