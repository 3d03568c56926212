#version 450
// Busy work for fence-timeout tests: `iterations` dependent steps per thread.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { uint values[]; };
layout(push_constant) uniform Push { uint iterations; } pc;
void main() {
  uint x = gl_GlobalInvocationID.x;
  for (uint k = 0; k < pc.iterations; ++k) { x = x * 1664525u + 1013904223u; }
  values[gl_GlobalInvocationID.x] = x;
}
