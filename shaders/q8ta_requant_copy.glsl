#version 450
// int8 requantize on a plain 16-byte copy: the requantize math of q8ta_pixel_shuffle_block without its shuffle, so
// the benchmark can tell what the math costs on perfectly coalesced traffic. Each thread moves 4 ivec4 (64 bytes,
// as a block-kernel thread); a workgroup covers 4 · local_x consecutive ivec4, each access a contiguous run.
// REQUANT_CONVERT = 1: int <-> float conversions; 0: the magic-number arithmetic (include/requant_int8.glslh).
// REQUANT_FIXED = 1: one integer multiply-add and a shift per byte (requant_word_fixed; fixed_* from the host, proven
// exact there); REQUANT_FIXED_CLAMP 0 where no input saturates. REQUANT_PACKED = 1 (with REQUANT_FIXED): the line on
// two bytes per 32 × 32 → 64-bit multiply (requant_word_packed).
// passthrough = 1: a plain copy through the same code. REQUANT_NONE = 1 (instruction counts only: the baseline
// the requantize maths are counted against) makes requantize_word the identity.

#extension GL_EXT_control_flow_attributes : require

#include "dispatch.glslh"
#include "requant_int8.glslh"

#ifndef REQUANT_CONVERT
#define REQUANT_CONVERT 0
#endif
#ifndef REQUANT_FIXED
#define REQUANT_FIXED 0
#endif
#ifndef REQUANT_PACKED
#define REQUANT_PACKED 0
#endif

layout(std430, set = 0, binding = 0) writeonly buffer Out { ivec4 out_vec[]; };
layout(std430, set = 0, binding = 1) readonly buffer In { ivec4 in_vec[]; };

layout(push_constant) uniform Params {
  float scale_in;
  float inv_scale_out;
  int zp_in;
  int zp_out;
  int num_vec4;
  int passthrough;
  int fixed_mul;    // REQUANT_FIXED: q + 128 = clamp((fixed_mul · (v + 128) + fixed_add) >> fixed_shift, 0, 255)
  int fixed_add;
  int fixed_shift;
} p;

int requantize_word(int w) {
#if defined(REQUANT_NONE) && REQUANT_NONE
  return w;
#elif REQUANT_FIXED && REQUANT_PACKED
  return requant_word_packed(w, p.fixed_mul, p.fixed_add, p.fixed_shift);
#elif REQUANT_FIXED
  return requant_word_fixed(w, p.fixed_mul, p.fixed_add, p.fixed_shift);
#elif REQUANT_CONVERT
  ivec4 q;
  for (int k = 0; k < 4; ++k) {
    q[k] = requant_convert(bitfieldExtract(w, 8 * k, 8), p.scale_in, p.inv_scale_out, p.zp_in, p.zp_out) & 0xFF;
  }
  return q.x | (q.y << 8) | (q.z << 16) | (q.w << 24);
#else
  return requant_word_magic(w, requant_magic_params(p.scale_in, p.inv_scale_out, p.zp_in, p.zp_out));
#endif
}

void main() {
  const int group = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
  const int local_x = int(gl_WorkGroupSize.x);
  [[unroll]] for (int k = 0; k < 4; ++k) {
    const int i = (4 * group + k) * local_x + int(gl_LocalInvocationID.x);
    if (i < p.num_vec4) {
      ivec4 v = in_vec[i];
      if (p.passthrough == 0) {
        v = ivec4(requantize_word(v.x), requantize_word(v.y), requantize_word(v.z), requantize_word(v.w));
      }
      out_vec[i] = v;
    }
  }
}
