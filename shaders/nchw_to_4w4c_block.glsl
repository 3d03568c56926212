#version 450
// Pack NCHW int8 into 4W4C one 16-byte block per thread: the block's 4 channel rows are 4 consecutive NCHW bytes
// each (widths w0..w0+3), read as one or two words, then transposed in registers so word k holds width w0+k with
// its 4 channels in the lanes. Threads run width-block fastest so neighbouring threads read neighbouring bytes of
// a row (coalesced loads); the generic per-word kernel (nchw_to_int8x4.glsl) decodes every lane's index instead.
// Padding (channels >= C, widths >= W) packs as 0, as in the generic kernel.
#include "dispatch.glslh"
#include "indexing.glslh"

layout(set = 0, binding = 0) writeonly buffer Packed { ivec4 packed_blocks[]; };
layout(set = 0, binding = 1) readonly buffer Nchw { uint nchw_words[]; };
layout(set = 0, binding = 2) uniform PackedMeta { BufferMetadata meta; };

// The 4 bytes from byte `offset` on, little-endian; only the first `valid` (1..4) are kept, the rest are 0.
uint row_bytes(int offset, int valid, int num_words) {
  const int word = offset >> 2;
  const int shift = (offset & 3) * 8;
  uint v = nchw_words[word] >> shift;
  if (shift != 0 && word + 1 < num_words) {
    v |= nchw_words[word + 1] << (32 - shift);
  }
  return valid >= 4 ? v : v & ((1u << (8 * valid)) - 1u);
}

void main() {
  const ivec4 sizes = meta_sizes(meta);  // WHCN
  const int W = sizes.x, H = sizes.y, C = sizes.z, N = sizes.w;
  const int W4 = (W + 3) / 4, C4 = (C + 3) / 4;
  const int t = int(dispatch_index());
  if (t >= N * H * C4 * W4) {
    return;
  }
  const int w4 = t % W4;
  int rest = t / W4;
  const int c4 = rest % C4;
  rest /= C4;
  const int h = rest % H;
  const int n = rest / H;

  const int valid = min(4, W - 4 * w4);
  const int num_words = (N * C * H * W + 3) / 4;
  uint rows[4];
  for (int j = 0; j < 4; ++j) {
    const int c = 4 * c4 + j;
    rows[j] = c < C ? row_bytes(((n * C + c) * H + h) * W + 4 * w4, valid, num_words) : 0u;
  }
  ivec4 block;
  for (int k = 0; k < 4; ++k) {  // word k = width w0 + k; lane j = channel c0 + j
    const int s = 8 * k;
    block[k] = int(((rows[0] >> s) & 0xFFu) | (((rows[1] >> s) & 0xFFu) << 8) | (((rows[2] >> s) & 0xFFu) << 16)
                   | (((rows[3] >> s) & 0xFFu) << 24));
  }
  packed_blocks[((n * H + h) * W4 + w4) * C4 + c4] = block;
}
