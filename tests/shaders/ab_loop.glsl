#version 450
// `workbench ab`'s test pair: each invocation runs N x FACTOR steps of a 32-bit LCG on its input word and writes the
// input back (+1 only where the LCG lands on one value: the compiler must keep the loop, the output is the input's).
// ab_loop_4x.glsl is this loop 4 times longer: the same interface and output, 4x the work.
#ifndef FACTOR
#define FACTOR 1u
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
