#version 450
// Split-K's second dispatch for the cooperative-matrix conv: adds the P int32 partial sums that coopmat_conv.glsl
// (EPILOGUE = 0, `splits` = P) wrote as P slices of M x N, and requantizes them as the conv's epilogue does
// (q8ta_conv2d_pw.glsl's fp32 operations, in order) into int8 NHWC (4C). One invocation: 16 channels of one pixel
// (four 16-byte loads per slice, one 16-byte store). No cooperative matrix: it runs on any Vulkan device.
#extension GL_EXT_control_flow_attributes : require

#include "dispatch.glslh"

layout(set = 0, binding = 0) writeonly buffer Out { uvec4 out_vec[]; };     // M x N int8, N / 16 uvec4 a pixel
layout(set = 0, binding = 1) readonly buffer Partials { ivec4 partials[]; }; // P x M x N int32
layout(set = 0, binding = 2) readonly buffer WeightSums { ivec4 weight_sums[]; };
layout(set = 0, binding = 3) readonly buffer WeightScales { vec4 weight_scales[]; };
layout(set = 0, binding = 4) readonly buffer Bias { vec4 bias[]; };
layout(push_constant) uniform Params {
  uint M; uint N; uint splits; uint pad0;
  float input_scale; int input_zp; float output_inv_scale; int output_zp; int apply_bias; int relu;
} p;

#include "int8x4.glslh"
#include "conv_requant.glslh"

void main() {
  const uint groups = p.N / 16;  // 16-channel groups of a pixel
  const uint idx = dispatch_index();
  if (idx >= p.M * groups) {
    return;
  }
  const uint q0 = idx * 4;  // first ivec4 (4 channels) of this invocation's 16 channels, in one slice
  const uint slice = p.M * p.N / 4;
  ivec4 s0 = partials[q0], s1 = partials[q0 + 1], s2 = partials[q0 + 2], s3 = partials[q0 + 3];
  for (uint z = 1; z < p.splits; ++z) {
    const uint o = z * slice + q0;
    s0 += partials[o];
    s1 += partials[o + 1];
    s2 += partials[o + 2];
    s3 += partials[o + 3];
  }
  const uint c4 = (idx % groups) * 4;  // the channels' ivec4 / vec4 index
  uvec4 words;
  words.x = uint(conv_requantize4(s0, weight_sums[c4], weight_scales[c4] * p.input_scale, bias[c4]));
  words.y = uint(conv_requantize4(s1, weight_sums[c4 + 1], weight_scales[c4 + 1] * p.input_scale, bias[c4 + 1]));
  words.z = uint(conv_requantize4(s2, weight_sums[c4 + 2], weight_scales[c4 + 2] * p.input_scale, bias[c4 + 2]));
  words.w = uint(conv_requantize4(s3, weight_sums[c4 + 3], weight_scales[c4 + 3] * p.input_scale, bias[c4 + 3]));
  out_vec[idx] = words;
}
