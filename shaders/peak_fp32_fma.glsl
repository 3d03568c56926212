#version 450
// Peak fp32 FMA throughput: CHAINS independent fma chains per thread, `iterations` rounds; each fma = 2 FLOPs.
#ifndef CHAINS
#define CHAINS 8
#endif

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Out { float results[]; };
layout(push_constant) uniform Params { int iterations; int seed; } p;

void main() {
  const int id = int(gl_GlobalInvocationID.x);
  const float m = 0.999 + float(p.seed) * 1e-9;
  const float add = 1e-3 * float(id & 7);
  float acc[CHAINS];
  for (int c = 0; c < CHAINS; ++c) {
    acc[c] = float(id + c);
  }
  for (int i = 0; i < p.iterations; ++i) {
    for (int c = 0; c < CHAINS; ++c) {
      acc[c] = fma(acc[c], m, add);
    }
  }
  float total = 0.0;
  for (int c = 0; c < CHAINS; ++c) {
    total += acc[c];
  }
  results[id] = total;
}
