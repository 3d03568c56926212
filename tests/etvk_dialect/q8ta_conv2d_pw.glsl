#version 450 core
// Test shader in ET-VK's template dialect, written for the workbench (see q8ta_conv2d_pw.yaml).
// One thread: 4 output widths x 4 output channels of one row, int32 accumulators, weights read from a 2-D int
// texture with texelFetch (texel (oc4, k4) = 4 output channels, each 4 int8 of input channels 4*k4 .. 4*k4 + 3).

#extension GL_EXT_control_flow_attributes : require
$if USE_INT8_DOT_PRODUCT_EXT == 1:
  #extension GL_EXT_integer_dot_product : require

#define PRECISION ${PRECISION}
#define VEC4_T ${texel_load_type(DTYPE, "buffer")}
#define TILE_M4 1
#define TILE_N4 1

layout(std430) buffer;

#include "indexing.glslh"

${layout_declare_tensor(B, "w", "t_out", "int", "buffer", is_scalar_array=True)}
${layout_declare_tensor(B, "r", "t_in", "int", "buffer", is_scalar_array=False)}
${layout_declare_tensor(B, "r", "t_weight", "int", "texture2d", is_scalar_array=False)}
${layout_declare_tensor(B, "r", "t_sums", "int", "buffer", is_scalar_array=False)}
${layout_declare_tensor(B, "r", "t_scales", DTYPE, "buffer", is_scalar_array=False)}
${layout_declare_tensor(B, "r", "t_bias", DTYPE, "buffer", is_scalar_array=False)}
${layout_declare_ubo(B, "BufferMetadata", "outp")}
${layout_declare_ubo(B, "BufferMetadata", "inp")}

layout(push_constant) uniform restrict Block {
  float input_scale;
  int input_zp;
  float output_inv_scale;
  int output_zp;
  int K4;
  int OC4;
};

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

${layout_declare_spec_const(C, "int", "apply_bias", "1")}
${layout_declare_spec_const(C, "int", "activation_type", "0")}
${layout_declare_spec_const(C, "int", "outp_layout", "0")}
${layout_declare_spec_const(C, "int", "inp_layout", "0")}

int dot_acc(int a, int b, int acc) {
$if USE_INT8_DOT_PRODUCT_EXT == 1:
  return dotPacked4x8AccSatEXT(a, b, acc);
$else:
  ivec4 x = (ivec4(a) << ivec4(24, 16, 8, 0)) >> 24;
  ivec4 y = (ivec4(b) << ivec4(24, 16, 8, 0)) >> 24;
  return acc + x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}

void main() {
  const int oc4 = int(gl_GlobalInvocationID.x);
  const int w4 = int(gl_GlobalInvocationID.y);
  const int h = int(gl_GlobalInvocationID.z);
  const ivec4 out_sizes = meta_sizes(outp);
  if (oc4 >= OC4 || w4 >= (out_sizes.x + 3) / 4 || h >= out_sizes.y) {
    return;
  }
  const ivec4 in_strides = meta_strides(inp);
  ivec4 acc[4];
  [[unroll]] for (int m = 0; m < 4; ++m) {
    acc[m] = ivec4(0);
  }
  for (int k4 = 0; k4 < K4; ++k4) {
    const ivec4 x = t_in[w4 * in_strides.x + h * in_strides.y + k4 * in_strides.z];
    const ivec4 wt = texelFetch(t_weight, ivec2(oc4, k4), 0);
    [[unroll]] for (int m = 0; m < 4; ++m) {
      acc[m] = ivec4(dot_acc(x[m], wt.x, acc[m].x), dot_acc(x[m], wt.y, acc[m].y),
                     dot_acc(x[m], wt.z, acc[m].z), dot_acc(x[m], wt.w, acc[m].w));
    }
  }
  const ivec4 sums = t_sums[oc4];
  const vec4 scale = vec4(t_scales[oc4]) * input_scale;
  const vec4 bias = apply_bias > 0 ? vec4(t_bias[oc4]) : vec4(0.0);
  const ivec4 out_strides = meta_strides(outp);
  const bool one_wide = layout_outer_block(outp_layout) == 1;  // 4C1W: one word per (w, h, c4)
  [[unroll]] for (int m = 0; m < 4; ++m) {
    const int w = w4 * 4 + m;
    if (w < out_sizes.x) {
      vec4 y = fma(vec4(acc[m] - input_zp * sums), scale, bias);
      if (activation_type > 0) {
        y = max(y, vec4(0.0));
      }
      const ivec4 q = clamp(ivec4(round(y * output_inv_scale)) + output_zp, -128, 127);
      const int word = (q.x & 0xFF) | ((q.y & 0xFF) << 8) | ((q.z & 0xFF) << 16) | ((q.w & 0xFF) << 24);
      const int idx = one_wide ? w * out_strides.x + h * out_strides.y + oc4 * out_strides.z
                               : 4 * (w4 * out_strides.x + h * out_strides.y + oc4 * out_strides.z) + m;
      t_out[idx] = word;
    }
  }
}
