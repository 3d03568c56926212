#version 450
#extension GL_EXT_control_flow_attributes : require
// Peak packed-int8 dot-product throughput (vkpeak-style): every thread runs CHAINS independent accumulator chains,
// UNROLL rounds per loop trip, `iterations` trips: iterations * UNROLL * CHAINS dots of 4 MACs each per thread.
// Each chain feeds its own accumulator back as the packed operand (acc = dot(acc, b) + acc): no operand is
// loop-invariant (so OpSDot cannot be hoisted), and no chain waits on another (so CHAINS dots are in flight).
// SATURATE=1: OpSDotAccSat (ET-VK's choice); 0: OpSDot + a wrapping add. USE_INT_DOT_EXT=0: the portable fallback.
#include "int8_dot.glslh"

#ifndef CHAINS
#define CHAINS 8
#endif
#ifndef UNROLL
#define UNROLL 8
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
layout(push_constant) uniform Params { int iterations; int operand; float mul; float add; } p;

void main() {
  const int id = int(gl_GlobalInvocationID.x);
  const int b = p.operand ^ id;  // per-thread, unknown to the compiler
  int acc[CHAINS];
  [[unroll]] for (int c = 0; c < CHAINS; ++c) {
    acc[c] = id + c * 0x01000193;
  }
  for (int i = 0; i < p.iterations; ++i) {
    [[unroll]] for (int u = 0; u < UNROLL; ++u) {
      [[unroll]] for (int c = 0; c < CHAINS; ++c) {
        acc[c] = DOT(acc[c], b, acc[c]);
      }
    }
  }
  int total = 0;
  [[unroll]] for (int c = 0; c < CHAINS; ++c) {
    total += acc[c];
  }
  results[id] = total;
}
