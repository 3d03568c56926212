#version 450
// Peak packed-int8 dot-product throughput (in the spirit of vkpeak): every thread runs CHAINS independent
// accumulator chains of OpSDotAccSat (SATURATE=1) or OpSDot + add (SATURATE=0), or the portable fallback, for
// `iterations` rounds. Each dot is 4 MACs.
// Operands change every round so nothing folds; the sum is stored so nothing is dead.
#include "int8_dot.glslh"

#ifndef CHAINS
#define CHAINS 8
#endif
#ifndef SATURATE
#define SATURATE 1
#endif
#if SATURATE
#define DOT dot4x8_acc_sat
#else
#define DOT dot4x8_acc
#endif

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Out { int results[]; };
layout(push_constant) uniform Params { int iterations; int seed; } p;

void main() {
  const int id = int(gl_GlobalInvocationID.x);
  int a = id * 0x01010101 + p.seed;
  int b = 0x02FF03FE ^ id;
  int acc[CHAINS];
  for (int c = 0; c < CHAINS; ++c) {
    acc[c] = c;
  }
  for (int i = 0; i < p.iterations; ++i) {
    for (int c = 0; c < CHAINS; ++c) {
      acc[c] = DOT(a, b + c, acc[c]);
    }
    a ^= acc[i & (CHAINS - 1)];  // a data dependence per round keeps the loop honest
  }
  int total = 0;
  for (int c = 0; c < CHAINS; ++c) {
    total += acc[c];
  }
  results[id] = total;
}
