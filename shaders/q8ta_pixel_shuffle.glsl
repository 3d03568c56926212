#version 450
// Fused int8x4 pixel shuffle, (N, C*r*r, H, W) -> (N, C, H*r, W*r), on the channels-packed int8 family
// (4W4C, 4C1W, 4C: packed dim C, block 4), input and output layouts chosen independently.
//
// One thread per output word: the 4 lanes of output word (n, c0..c0+3, oh, ow).  Lane i (channel c = c0 + i)
// reads input channel c*r*r + (oh % r)*r + (ow % r) at (ih, iw) = (oh / r, ow / r).  With the packed dim C and
// block 4, the byte index of an input channel c_in at a fixed (n, ih, iw) is
//     byte(c_in) = byte(0) + (c_in / 4) * strides[C] * block_numel + c_in % 4,
// so the index helper runs once per thread and each lane adds its channel's offset.  For r = 2 (ET-VK's case)
// c_in % 4 is the same for every lane and the 4 words are one channel block apart; for any other r the lanes come
// from different input lanes (r = 1: all from one word; r = 3: c_in advances by 9), which this formula covers.
//
// passthrough != 0 (scales and zero points agree, host-side rule): a pure byte shuffle.  Otherwise requantize in
// fp32 in ET-VK's order: dq = float(q_in - zp_in) * scale_in;  q = clamp(roundEven(dq * inv_scale_out) + zp_out).
// roundEven (ties to even) instead of ET-VK's round(), whose direction at .5 is implementation-defined.
// Channel lanes past C_out are written 0; words of the width padding (4W4C) are not written.
//
// Bindings: 0 output words, 1 input words, 2 output BufferMetadata, 3 input BufferMetadata.
// Spec constants (ET-VK's order for this op): 3 input layout, 4 output layout.  Push constants: the 24 bytes of
// Q8TA_PIXEL_SHUFFLE_PARAMS (include/requant_int8.glslh).
// Variants (shaders/q8ta_pixel_shuffle.yaml): q8ta_pixel_shuffle reads r from the push constants, as ET-VK does;
// q8ta_pixel_shuffle_rspec (SPECIALIZE_R) takes r from specialization constant 5 instead, so that the divisions
// by r fold into shifts / multiplies (the push constant is still passed and ignored).  OUTPUT_ORDER (variants
// *_outorder): thread t writes output word t (memory order of the output layout) instead of ET-VK's
// (W_out, H_out, channel word, N) order; the dispatch then covers every output word, padding included.

#extension GL_EXT_control_flow_attributes : require

#include "dispatch.glslh"
#include "indexing.glslh"
#include "int8x4.glslh"
#include "requant_int8.glslh"

layout(constant_id = 3) const int in_layout = 0x44023102;
layout(constant_id = 4) const int out_layout = 0x44023102;
#if SPECIALIZE_R
layout(constant_id = 5) const int r_spec = 2;
#endif

BUFFER_IO(int, int)
BUFFER_IO_METADATA

layout(push_constant) uniform Params { Q8TA_PIXEL_SHUFFLE_PARAMS } p;

void main() {
  const ivec4 out_sizes = meta_sizes(out_meta);  // WHCN
  const int W_out = out_sizes.x;
  const int H_out = out_sizes.y;
  const int C_out = out_sizes.z;
  const int t = int(dispatch_index());
#if OUTPUT_ORDER
  // Thread t writes output word t: neighbouring threads write neighbouring words (coalesced stores), whatever the
  // output layout.  Words of the padding (4W4C pads W) are skipped, as in ET-VK's order.
  if (t >= meta_num_words(out_meta)) {
    return;
  }
  const ivec4 first = word_idx_to_tidx(out_meta, t, out_layout);  // lane 0 of the word
  if (first.x >= W_out || first.y >= H_out) {
    return;
  }
  const int ow = first.x;
  const int oh = first.y;
  const int c0 = first.z;
  const int n = first.w;
#else
  const int c_words = (C_out + 3) / 4;
  if (t >= W_out * H_out * c_words * out_sizes.w) {
    return;
  }
  // Thread order as ET-VK: W_out fastest, then H_out, then channel words, then N.
  const int ow = t % W_out;
  const int oh = (t / W_out) % H_out;
  const int c0 = 4 * ((t / (W_out * H_out)) % c_words);
  const int n = t / (W_out * H_out * c_words);
#endif

#if SPECIALIZE_R
  const int r = r_spec;
#else
  const int r = p.upscale_factor;
#endif
  const int offset = (oh % r) * r + (ow % r);
  const int base = tidx_to_byte_idx(in_meta, ivec4(ow / r, oh / r, 0, n), in_layout);
  const int block_bytes = int(in_meta.strides[0].z) * layout_block_numel(in_layout);  // one channel block

  ivec4 q = ivec4(0);
  [[unroll]] for (int i = 0; i < 4; ++i) {
    const int c = c0 + i;
    if (c < C_out) {
      const int c_in = c * r * r + offset;
      const int b = base + (c_in >> 2) * block_bytes + (c_in & 3);
      int v = sext8(t_in[b >> 2], b & 3);
      if (p.passthrough == 0) {
        precise float dq = float(v - p.zp_in) * p.scale_in;
        precise float s = dq * p.inv_scale_out;
        v = clamp(int(roundEven(s)) + p.zp_out, -128, 127);
      }
      q[i] = v;
    }
  }
#if OUTPUT_ORDER
  t_out[t] = pack4x8(q);
#else
  t_out[tidx_to_word_idx(out_meta, ivec4(ow, oh, c0, n), out_layout)] = pack4x8(q);
#endif
}
