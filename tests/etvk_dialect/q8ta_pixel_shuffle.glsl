#version 450 core
// Test shader in ET-VK's template dialect, written for the workbench: a pixel shuffle (r = 2) of channels-packed
// int8x4 buffers with ET-VK's q8ta_pixel_shuffle interface, every index read from the BufferMetadata UBOs and the
// hashed layouts. One thread per output int32 word; no YAML, so the variant keeps the template's name.

#define PRECISION ${PRECISION}

layout(std430) buffer;

#include "indexing.glslh"

${layout_declare_tensor(B, "w", "t_outp", "int", "buffer")}
${layout_declare_tensor(B, "r", "t_inp", "int", "buffer")}
${layout_declare_ubo(B, "BufferMetadata", "outp")}
${layout_declare_ubo(B, "BufferMetadata", "inp")}

layout(push_constant) uniform restrict Block {
  float scale_in;
  float inv_scale_out;
  int zp_in;
  int zp_out;
  int r;
  int passthrough;
};

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

${layout_declare_spec_const(C, "int", "inp_layout", "0")}
${layout_declare_spec_const(C, "int", "outp_layout", "0")}

void main() {
  const ivec4 osz = meta_sizes(outp);
  const ivec4 isz = meta_sizes(inp);
  const int c_words = (osz.z + 3) / 4;
  int t = int(gl_GlobalInvocationID.x);
  if (t >= osz.x * osz.y * c_words * osz.w) {
    return;
  }
  const int ow = t % osz.x;
  t /= osz.x;
  const int oh = t % osz.y;
  t /= osz.y;
  const int c_base = 4 * (t % c_words);
  const int n = t / c_words;
  int word = 0;
  for (int i = 0; i < 4; ++i) {
    const int c_out = c_base + i;
    int q = 0;
    if (c_out < osz.z) {
      const ivec4 src = ivec4(ow / r, oh / r, c_out * r * r + (oh % r) * r + (ow % r), n);
      q = zp_in;
      if (tidx_in_bounds(src, isz)) {
        const int b = tidx_to_byte_idx(inp, src, inp_layout);
        q = (t_inp[b >> 2] << (24 - 8 * (b & 3))) >> 24;
      }
      if (passthrough == 0) {
        q = clamp(int(round(float(q - zp_in) * scale_in * inv_scale_out)) + zp_out, -128, 127);
      }
    }
    word |= (q & 0xFF) << (8 * i);
  }
  t_outp[tidx_to_word_idx(outp, ivec4(ow, oh, c_base, n), outp_layout)] = word;
}
