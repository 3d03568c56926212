#version 450
#extension GL_EXT_control_flow_attributes : require
// Peak fp32 FMA throughput: CHAINS independent fma chains per thread, UNROLL rounds per loop trip, `iterations`
// trips: iterations * UNROLL * CHAINS fmas (2 FLOPs each) per thread. mul and add come from push constants, so
// nothing folds (with mul = add = 1 every chain counts its own fmas exactly: the tests' hand count).
#include "peak.glslh"

layout(set = 0, binding = 0) writeonly buffer Out { float results[]; };

#define FMA_STEP(a) fma(a, p.mul, p.add)

void main() {
  const int id = int(gl_GlobalInvocationID.x);
  float acc[CHAINS];
  [[unroll]] for (int c = 0; c < CHAINS; ++c) {
    acc[c] = float((id & 255) + c);
  }
  PEAK_CHAINS(float, FMA_STEP)
}
