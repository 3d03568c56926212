#version 450
// Planted bug: every invocation writes one element past its own index, so the last one writes past the end of
// `dst` (n elements) — caught by GPU-assisted validation (buffer out-of-bounds check).
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Dst { uint dst[]; };
layout(set = 0, binding = 1) readonly buffer Src { uint src[]; };
layout(push_constant) uniform Params { uint n; } params;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i < params.n) {
    dst[i + OFFSET] = src[i];
  }
}
