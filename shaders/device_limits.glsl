#version 450
// What the device says about itself from inside a shader: SM count and warps per SM (GL_NV_shader_sm_builtins,
// SM_BUILTINS=1) and the SM clock (GL_ARB_shader_clock, CLOCK=1): thread 0 of every workgroup reads its
// subgroup clock around a dependent fma loop of `iterations` steps; cycles / the dispatch's timestamped
// duration = the clock the SMs ran at.
#if SM_BUILTINS
#extension GL_NV_shader_sm_builtins : require
#endif
#if CLOCK
#extension GL_ARB_shader_clock : require
#endif

#include "dispatch.glslh"
// words 0..3: SM count, warps per SM, 0, 0; then 4 words per workgroup: start (lo, hi), end (lo, hi)
layout(set = 0, binding = 0) buffer Out { uint words[]; };
layout(push_constant) uniform Params { int iterations; float mul; } p;

void main() {
  const uint group = gl_WorkGroupID.x;
#if SM_BUILTINS
  if (gl_GlobalInvocationID.x == 0) {
    words[0] = gl_SMCountNV;
    words[1] = gl_WarpsPerSMNV;
  }
#endif
#if CLOCK
  const uvec2 start = clock2x32ARB();
#endif
  float x = float(gl_LocalInvocationID.x);
  for (int i = 0; i < p.iterations; ++i) {
    x = fma(x, p.mul, 1.0);
  }
#if CLOCK
  const uvec2 end = clock2x32ARB();
  if (gl_LocalInvocationID.x == 0) {
    words[4 + 4 * group] = start.x;
    words[5 + 4 * group] = start.y;
    words[6 + 4 * group] = end.x;
    words[7 + 4 * group] = end.y;
  }
#endif
  if (x == -1.0) {  // never true (x grows): keeps the loop alive
    words[2] = 1u;
  }
}
