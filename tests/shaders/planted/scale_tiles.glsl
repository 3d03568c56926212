#version 450
// out[i] = 2 * in[i], one tile of TILE elements per invocation; BAD_LAST_TILE plants a wrong index in the last,
// partial tile (reads in[i - 1] there), caught by replay's comparison: wrong elements only in the last tile
layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) buffer Out { float out_data[]; };
layout(set = 0, binding = 1) buffer In { float in_data[]; };
layout(push_constant) uniform P { uint n; };
#define TILE 4u
void main() {
  uint t = gl_GlobalInvocationID.x;
  uint first = t * TILE;
  if (first >= n) return;
  bool last_partial = first + TILE > n;
  for (uint k = 0u; k < TILE; ++k) {
    uint i = first + k;
    if (i >= n) break;
#ifdef BAD_LAST_TILE
    uint src = last_partial ? i - 1u : i;
#else
    uint src = i;
#endif
    out_data[i] = 2.0 * in_data[src];
  }
}
