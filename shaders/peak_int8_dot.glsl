#version 450
#extension GL_EXT_control_flow_attributes : require
// Peak packed-int8 dot-product throughput (vkpeak-style): every thread runs CHAINS independent accumulator chains,
// UNROLL rounds per loop trip, `iterations` trips: iterations * UNROLL * CHAINS dots of 4 MACs each per thread.
// Each chain feeds its own accumulator back as the packed operand (acc = dot(acc, b) + acc): no operand is
// loop-invariant (so OpSDot cannot be hoisted), and no chain waits on another (so CHAINS dots are in flight).
// SATURATE=1: OpSDotAccSat (ET-VK's choice); 0: OpSDot + a wrapping add. USE_INT_DOT_EXT=0: the portable fallback.
#include "int8_dot.glslh"
#include "peak.glslh"

#ifndef SATURATE
#define SATURATE 1
#endif
#if SATURATE
#define DOT dot4x8_acc_sat
#else
#define DOT dot4x8_acc
#endif

layout(set = 0, binding = 0) writeonly buffer Out { int results[]; };

#define DOT_STEP(a) DOT(a, b, a)  // the accumulator is also the packed operand

void main() {
  const int id = int(gl_GlobalInvocationID.x);
  const int b = p.operand ^ id;  // per-thread, unknown to the compiler
  int acc[CHAINS];
  [[unroll]] for (int c = 0; c < CHAINS; ++c) {
    acc[c] = id + c * 0x01000193;
  }
  PEAK_CHAINS(int, DOT_STEP)
}
