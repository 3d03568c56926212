#version 450
// The 4-bit GEMV with int8 activations (torchao's 8da4w numerics: activations quantized per token, asymmetric int8;
// weights int4 group-symmetric), M = 1..8:
//   out[m, n] = sx[m] · ( sum_g s[n, g] · sum_{k in g} q[n, k] · xq[m, k]  -  zp[m] · R[n] ),
//   R[n] = sum_g s[n, g] · sum_{k in g} q[n, k]     (a per-row constant of the weight, computed when it is packed)
// Weights in the tiled layout with a thread's chunks consecutive in K (q4_gemv_tiled.glsl's lane_chunks: uvec4
// (t, s·TK + lane) = rows 4t .. 4t + 3 × K values 8c .. 8c + 7 of chunk c = lane·STEPS + s). Nibbles n = q + 8:
// (w & 0x0F0F0F0F) is nibbles 0, 2, 4, 6 as bytes, ((w >> 4) & 0x0F0F0F0F) nibbles 1, 3, 5, 7, each dotted with the
// chunk's even / odd activation bytes by one packed int8 dot; sum (n - 8) · x = sum n · x - 8 · sum x, so the
// chunk's -8 · sum x (from the host, with the activations) starts the sum. Integer sums are exact; each run of a
// thread's chunks in one scale group is converted once and scaled in fp32.
// Defines: M, TK, LOCAL, STEPS (chunks a thread per tile), PG (chunks per scale group), USE_INT_DOT_EXT
// (int8_dot.glslh), DIAG_LOADS 5 (wrong by design: every tile reads the first 8 tiles' data). ROWS is 4.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "int8_dot.glslh"

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

#define ROWS 4
#define SETS (LOCAL / TK)

layout(std430, set = 0, binding = 0) writeonly buffer Out { float out_f[]; };  // [M, N]
layout(std430, set = 0, binding = 1) readonly buffer X { ivec4 x_q[]; };       // [M, K / 8]: even, odd, -8·sum, 0
layout(std430, set = 0, binding = 2) readonly buffer W { uvec4 w_t[]; };       // [N / 4 tiles, STEPS · TK]
layout(std430, set = 0, binding = 3) readonly buffer S { uvec2 s_t[]; };       // [N / 4 tiles, groups] 4 fp16
layout(std430, set = 0, binding = 4) readonly buffer R { float r_n[]; };       // [N] the rows' constants
layout(std430, set = 0, binding = 5) readonly buffer Q { vec2 q_x[]; };        // [M] a token's scale, zero point

layout(push_constant) uniform Params {
  int N;
  int K;
  int group_size;
  int groups;
} p;

#include "q4_gemv_reduce.glslh"

#if DIAG_LOADS == 5
#define CACHED(tile) ((tile) & 7)  // every thread reads the first 8 tiles (cache-resident): the arithmetic's own time
#else
#define CACHED(tile) (tile)
#endif

// A thread's chunk c = t·STEPS + s starts a scale group where c % PG == 0 and ends one where (c + 1) % PG == 0
// (PG = chunks per group): scales are loaded and sums converted only there (and at a thread's first / last chunk).
// Where STEPS and PG align every thread of a subgroup does so at the same steps; where not, the subgroup issues the
// union of its threads' steps.
void load_tile(int tile, int t, int KC, out uvec4 w[STEPS], out uvec2 sc[STEPS]) {
  tile = CACHED(tile);
  [[unroll]] for (int s = 0; s < STEPS; ++s) {
    const int c = t * STEPS + s;
    w[s] = w_t[tile * (STEPS * TK) + s * TK + t];
    if (s == 0 || c % PG == 0) {
      sc[s] = s_t[tile * p.groups + min(c, KC - 1) / PG];
    } else {
      sc[s] = sc[s - 1];
    }
  }
}

// sum over the word's 8 values of (n - 8) · x, starting from acc (which holds the chunk's -8 · sum x once per row).
int dot8(uint w, ivec4 x, int acc) {
  acc = dot4x8_acc(int(w & 0x0F0F0F0Fu), x.x, acc);
  return dot4x8_acc(int((w >> 4) & 0x0F0F0F0Fu), x.y, acc);
}

void main() {
  const int lid = int(gl_LocalInvocationID.x);
  const int t = lid % TK;
  const int set = lid / TK;
  const int wg = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);
  const int wgs = int(gl_NumWorkGroups.x * gl_NumWorkGroups.y);
  const int KC = p.K / 8;
  const int tiles = (p.N + 3) / 4;

  ivec4 xs[STEPS][M];  // a thread's chunks, read once (chunks past K: zero activations, zero sum)
  [[unroll]] for (int s = 0; s < STEPS; ++s) {
    const int c = t * STEPS + s;
    [[unroll]] for (int m = 0; m < M; ++m) {
      xs[s][m] = c < KC ? x_q[m * KC + c] : ivec4(0);
    }
  }

  uvec4 w[STEPS];
  uvec2 sc[STEPS];
  int base = wg * SETS;
  load_tile(min(base + set, tiles - 1), t, KC, w, sc);
  for (; base < tiles; base += wgs * SETS) {  // grid-stride over tiles; the next tile loads before this computes
    const int tile = base + set;
    const uvec4 wc[STEPS] = w;
    const uvec2 scc[STEPS] = sc;
    if (base + wgs * SETS < tiles) {
      load_tile(min(base + wgs * SETS + set, tiles - 1), t, KC, w, sc);
    }
    float acc[M][ROWS];
    [[unroll]] for (int m = 0; m < M; ++m) {
      int ia[ROWS] = int[ROWS](0, 0, 0, 0);
      [[unroll]] for (int r = 0; r < ROWS; ++r) {
        acc[m][r] = 0.0;
      }
      [[unroll]] for (int s = 0; s < STEPS; ++s) {
        ia[0] = dot8(wc[s].x, xs[s][m], ia[0] + xs[s][m].z);
        ia[1] = dot8(wc[s].y, xs[s][m], ia[1] + xs[s][m].z);
        ia[2] = dot8(wc[s].z, xs[s][m], ia[2] + xs[s][m].z);
        ia[3] = dot8(wc[s].w, xs[s][m], ia[3] + xs[s][m].z);
        if (s == STEPS - 1 || (t * STEPS + s + 1) % PG == 0) {  // the end of a run in one group: convert, scale
          const vec2 s01 = unpackHalf2x16(scc[s].x), s23 = unpackHalf2x16(scc[s].y);
          acc[m][0] += float(ia[0]) * s01.x;
          acc[m][1] += float(ia[1]) * s01.y;
          acc[m][2] += float(ia[2]) * s23.x;
          acc[m][3] += float(ia[3]) * s23.y;
          ia = int[ROWS](0, 0, 0, 0);
        }
      }
    }
    reduce_set(t, acc);
    if (t == 0 && tile < tiles) {
      [[unroll]] for (int r = 0; r < ROWS; ++r) {
        const int row = tile * ROWS + r;
        if (row < p.N) {
          [[unroll]] for (int m = 0; m < M; ++m) {
            out_f[m * p.N + row] = q_x[m].x * (acc[m][r] - q_x[m].y * r_n[row]);
          }
        }
      }
    }
  }
}
