#version 450
// ab_loop.glsl with FACTOR 4: the same interface and output, 4x the loop (`workbench ab`'s test pair).
#ifndef FACTOR
#define FACTOR 4u
#endif
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) writeonly buffer Out { uint out_words[]; };
layout(set = 0, binding = 1) readonly buffer In { uint in_words[]; };
layout(push_constant) uniform Params { uint steps; uint count; };

void main() {
  uint g = gl_GlobalInvocationID.x;
  if (g >= count) return;
  uint x = in_words[g];
  uint acc = x;
  for (uint k = 0u; k < steps * FACTOR; ++k) acc = acc * 1664525u + 1013904223u;
  out_words[g] = x + uint(acc == 0x9E3779B9u);
}
