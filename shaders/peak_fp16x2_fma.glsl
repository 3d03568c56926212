#version 450
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
// Peak packed-fp16 FMA throughput (the arithmetic of the 4-bit GEMV's half2 / tiled builds): CHAINS independent
// f16vec2 fma chains per thread, UNROLL rounds per loop trip, `iterations` trips: iterations * UNROLL * CHAINS
// packed fmas (2 FMAs, 4 FLOPs each) per thread. mul and add come from push constants, so nothing folds (with
// mul = add = 1 every lane counts its own fmas exactly, up to 2048: the tests' hand count).
#include "peak.glslh"

layout(set = 0, binding = 0) writeonly buffer Out { float results[]; };

void main() {
  const int id = int(gl_GlobalInvocationID.x);
  const f16vec2 mul = f16vec2(float16_t(p.mul)), add = f16vec2(float16_t(p.add));
  f16vec2 acc[CHAINS];
  [[unroll]] for (int c = 0; c < CHAINS; ++c) {
    acc[c] = f16vec2(float16_t((id & 255) + c), float16_t((id & 255) + c + 1));
  }
  for (int i = 0; i < p.iterations; ++i) {
    [[unroll]] for (int u = 0; u < UNROLL; ++u) {
      [[unroll]] for (int c = 0; c < CHAINS; ++c) {
        acc[c] = fma(acc[c], mul, add);
      }
    }
  }
  float total = 0.0;
  [[unroll]] for (int c = 0; c < CHAINS; ++c) {
    total += float(acc[c].x) + float(acc[c].y);
  }
  results[id] = total;
}
