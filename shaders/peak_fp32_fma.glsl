#version 450
#extension GL_EXT_control_flow_attributes : require
// Peak fp32 FMA throughput: CHAINS independent fma chains per thread, UNROLL rounds per loop trip, `iterations`
// trips: iterations * UNROLL * CHAINS fmas (2 FLOPs each) per thread. mul and add come from push constants, so
// nothing folds (with mul = add = 1 every chain counts its own fmas exactly: the tests' hand count).
#ifndef CHAINS
#define CHAINS 8
#endif
#ifndef UNROLL
#define UNROLL 8
#endif

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;
layout(set = 0, binding = 0) writeonly buffer Out { float results[]; };
layout(push_constant) uniform Params { int iterations; int operand; float mul; float add; } p;

void main() {
  const int id = int(gl_GlobalInvocationID.x);
  float acc[CHAINS];
  [[unroll]] for (int c = 0; c < CHAINS; ++c) {
    acc[c] = float((id & 255) + c);
  }
  for (int i = 0; i < p.iterations; ++i) {
    [[unroll]] for (int u = 0; u < UNROLL; ++u) {
      [[unroll]] for (int c = 0; c < CHAINS; ++c) {
        acc[c] = fma(acc[c], p.mul, p.add);
      }
    }
  }
  float total = 0.0;
  [[unroll]] for (int c = 0; c < CHAINS; ++c) {
    total += acc[c];
  }
  results[id] = total;
}
