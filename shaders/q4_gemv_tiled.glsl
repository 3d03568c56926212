#version 450
// The workbench's 4-bit group-wise GEMV, tiled layout (decode, M = 1..8 rows of activations):
//   out[m, n] = sum_g scale[n, g] · sum_{k in group g} x[m, k] · q[n, k]      (fp32 accumulate, fp32 out)
// Weights in 4-row tiles: uvec4 (t, c) holds, in word r, row 4t + r's q + 8 for k = 8c .. 8c + 7 (nibble i = k 8c + i).
// So one 16-byte load gives a thread 4 rows × 8 K values that share one 16-byte vector of fp16 activations, and the
// TK threads of a tile read neighbouring 16-byte vectors: every load instruction of a subgroup reads one contiguous
// run, and a tile's whole stream (K / 2 · 4 bytes) is contiguous. Scales in the same tiles: uvec2 (t, g) holds the
// 4 rows' fp16 scales of group g. ROWS = 8 gives a thread two neighbouring tiles (two weight loads, one activation
// load). Work groups loop over tile sets (grid-stride) when the host caps their number (its spec's max_groups).
//
// Dequantize (the lop3 form): (w & 0x000F000F) | 0x6400_6400 is the fp16 pair 1024 + n for nibbles 0 and 4,
// (w & 0x00F000F0) | 0x6400_6400 is 1024 + 16n for nibbles 1 and 5; minus 1032, and times 1/16 minus 72, both are
// n - 8 exactly; w >> 8 gives nibbles 2, 6 and 3, 7 the same way. A word's 8 products are summed in packed fp16
// (4 multiply-adds, then the two halves), converted once and scaled in fp32: the host's tolerance covers the fp16
// rounding of those steps.
//
// Defines: M, ROWS (4 or 8 rows per thread), TK (threads along K per tile set), LOCAL (work group size, a multiple
// of TK), UNROLL (steps loaded ahead of use), PREFETCH (UNROLL steps kept in flight in a ring, each refilled before
// its step is computed, instead of UNROLL steps loaded then computed), ACT_SHARED (activations staged in shared
// memory once per work group; KC8 = M · K / 8 its size in uvec4), X_REGS / STEPS / ACC16 / LANE_CHUNKS / RUN (the
// activations-in-registers build, below), DIAG_LOADS (wrong results by design): 1 = every load kept, the arithmetic
// replaced by one conversion and add per load; 2 = the weight loads alone; with X_REGS also 3 = weights and scales
// loaded, no arithmetic; 4 = the arithmetic without scale loads (scales 1.0); 5 = everything, but the weights and
// scales of the first 8 tiles only (cache-resident): the arithmetic at full speed, without the stream; on that, 6 =
// without the dequantize's bias operations, 7 = without the per-word conversion and scaling, 8 = without both.
#extension GL_EXT_control_flow_attributes : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require

layout(local_size_x_id = 0, local_size_y_id = 1, local_size_z_id = 2) in;

#define SETS (LOCAL / TK)  // tile sets per work group
#if DIAG_LOADS >= 5
#define CACHED(tile) ((tile) & 7)  // every thread reads the first 8 tiles (cache-resident): the arithmetic's own time
#else
#define CACHED(tile) (tile)
#endif
#define TILES (ROWS / 4)   // 4-row tiles per thread

layout(std430, set = 0, binding = 0) writeonly buffer Out { float out_f[]; };  // [M, N]
layout(std430, set = 0, binding = 1) readonly buffer X { uvec4 x_h[]; };       // [M, K] fp16, 8 per uvec4
layout(std430, set = 0, binding = 2) readonly buffer W { uvec4 w_t[]; };       // [N / 4 tiles, K / 8] (above)
layout(std430, set = 0, binding = 3) readonly buffer S { uvec2 s_t[]; };       // [N / 4 tiles, groups] 4 fp16

layout(push_constant) uniform Params {
  int N;
  int K;
  int group_size;
  int groups;  // K / group_size
} p;

#if ACT_SHARED
shared uvec4 x_sh[KC8];
#endif
#include "q4_gemv_reduce.glslh"

uvec4 act(int m, int c, int KC) {
#if ACT_SHARED
  return x_sh[m * KC + c];
#else
  return x_h[m * KC + c];
#endif
}

// (x0, x4), (x1, x5), (x2, x6), (x3, x7) of 8 fp16 activations: the pairs the lop3 form multiplies.
void pairs(uvec4 h, out f16vec2 xs[4]) {
  xs[0] = unpackFloat2x16((h.x & 0xFFFFu) | (h.z << 16));
  xs[1] = unpackFloat2x16((h.x >> 16) | (h.z & 0xFFFF0000u));
  xs[2] = unpackFloat2x16((h.y & 0xFFFFu) | (h.w << 16));
  xs[3] = unpackFloat2x16((h.y >> 16) | (h.w & 0xFFFF0000u));
}

#if DIAG_LOADS == 6 || DIAG_LOADS == 8
// Diagnostic: the lop3 extractions and the products, without the bias operations (wrong by design).
f16vec2 dot8h(uint w, f16vec2 xs[4]) {
  const uint MAGIC = 0x64006400u;
  const uint w8 = w >> 8;
  f16vec2 d = unpackFloat2x16((w & 0x000F000Fu) | MAGIC) * xs[0];
  d = fma(unpackFloat2x16((w & 0x00F000F0u) | MAGIC), xs[1], d);
  d = fma(unpackFloat2x16((w8 & 0x000F000Fu) | MAGIC), xs[2], d);
  return fma(unpackFloat2x16((w8 & 0x00F000F0u) | MAGIC), xs[3], d);
}
#else
f16vec2 dot8h(uint w, f16vec2 xs[4]) {
  const uint MAGIC = 0x64006400u;
  const f16vec2 bias_lo = f16vec2(1032.0hf), sixteenth = f16vec2(0.0625hf), bias_hi = f16vec2(-72.0hf);
  const uint w8 = w >> 8;
  f16vec2 d = (unpackFloat2x16((w & 0x000F000Fu) | MAGIC) - bias_lo) * xs[0];
  d = fma(fma(unpackFloat2x16((w & 0x00F000F0u) | MAGIC), sixteenth, bias_hi), xs[1], d);
  d = fma(unpackFloat2x16((w8 & 0x000F000Fu) | MAGIC) - bias_lo, xs[2], d);
  return fma(fma(unpackFloat2x16((w8 & 0x00F000F0u) | MAGIC), sixteenth, bias_hi), xs[3], d);
}
#endif

float dot8(uint w, f16vec2 xs[4]) {
  const f16vec2 d = dot8h(w, xs);
  return float(d.x + d.y);
}

// Step c's loads: the thread's tiles' weight vectors and scales, the activations of chunk c for every m.
void load_step(int c, int KC, int per_group, int tile[TILES], out uvec4 w[TILES], out uvec2 s[TILES], out uvec4 h[M]) {
  [[unroll]] for (int i = 0; i < TILES; ++i) {
    const int at = CACHED(tile[i]);
    w[i] = w_t[at * KC + c];
#if DIAG_LOADS == 2
    s[i] = uvec2(0u);
#else
    s[i] = s_t[at * p.groups + c / per_group];
#endif
  }
  [[unroll]] for (int m = 0; m < M; ++m) {
#if DIAG_LOADS == 2
    h[m] = uvec4(0u);
#else
    h[m] = act(m, c, KC);
#endif
  }
}

// acc[m][r] += scale · (x[m, chunk] · row r's 8 weights of the chunk), for the thread's tiles' vectors w, scales s.
void accumulate(uvec4 h[M], uvec4 w[TILES], uvec2 s[TILES], inout float acc[M][ROWS]) {
  [[unroll]] for (int m = 0; m < M; ++m) {
#if DIAG_LOADS == 2
    [[unroll]] for (int i = 0; i < TILES; ++i) {
      acc[m][4 * i] += float(w[i].x + w[i].y + w[i].z + w[i].w);
    }
#elif DIAG_LOADS == 1
    [[unroll]] for (int i = 0; i < TILES; ++i) {
      acc[m][4 * i] += float((w[i].x ^ h[m].x) + (w[i].y ^ h[m].y) + (w[i].z ^ h[m].z) + (w[i].w ^ h[m].w)
                             + s[i].x + s[i].y);
    }
#elif DIAG_LOADS >= 7
    // Diagnostic: each row's fp16 word sums kept packed (no per-word conversion or scale), wrong by design.
    f16vec2 xs[4];
    pairs(h[m], xs);
    [[unroll]] for (int i = 0; i < TILES; ++i) {
      const f16vec2 d = dot8h(w[i].x, xs) + dot8h(w[i].y, xs) + dot8h(w[i].z, xs) + dot8h(w[i].w, xs);
      acc[m][4 * i] += uintBitsToFloat(packFloat2x16(d) & 0x3FFFFFFFu);
    }
#else
    f16vec2 xs[4];
    pairs(h[m], xs);
    [[unroll]] for (int i = 0; i < TILES; ++i) {
      const vec2 s01 = unpackHalf2x16(s[i].x), s23 = unpackHalf2x16(s[i].y);
      acc[m][4 * i] += dot8(w[i].x, xs) * s01.x;
      acc[m][4 * i + 1] += dot8(w[i].y, xs) * s01.y;
      acc[m][4 * i + 2] += dot8(w[i].z, xs) * s23.x;
      acc[m][4 * i + 3] += dot8(w[i].w, xs) * s23.y;
    }
#endif
  }
}

// The tile set's sums (reduce_set); thread 0 of the set stores the rows below N.
void finish(int t, int tile_set, int sets_needed, inout float acc[M][ROWS]) {
  reduce_set(t, acc);
  if (t == 0 && tile_set < sets_needed) {
    [[unroll]] for (int r = 0; r < ROWS; ++r) {
      const int row = tile_set * ROWS + r;
      if (row < p.N) {
        [[unroll]] for (int m = 0; m < M; ++m) {
          out_f[m * p.N + row] = acc[m][r];
        }
      }
    }
  }
}

#if X_REGS
// Activations in registers: thread t's chunks are c = t + s·TK (s < STEPS, STEPS = ceil(K / 8 / TK)) in every tile,
// so their fp16 pairs are read once per thread and every weight byte after that costs one 16-byte load and its
// arithmetic. Work groups loop over tile sets (grid-stride); the next set's weights and scales are loaded before
// the current set is computed. Chunks past K read the tile's last chunk against zero activations.
// Thread t's chunk s: with LANE_CHUNKS the thread's STEPS chunks are consecutive in K (c = t·STEPS + s) and the
// host stores chunk (t, s) of a tile at s·TK + t (tiles STEPS·TK vectors long, padding chunks zero weights), so a
// load instruction still reads TK neighbouring vectors while a thread's chunks share scale groups: its scales are
// loaded once per run of RUN chunks (RUN = chunks per group, or STEPS, when one divides the other; else 1).
int chunk_of(int t, int s) {
#if LANE_CHUNKS
  return t * STEPS + s;
#else
  return t + s * TK;
#endif
}

void load_tile(int tile_set, int t, int KC, int per_group, int tiles, out uvec4 w[STEPS][TILES],
               out uvec2 sc[STEPS][TILES]) {
  [[unroll]] for (int i = 0; i < TILES; ++i) {
    const int tile = CACHED(min(tile_set * TILES + i, tiles - 1));
    [[unroll]] for (int s = 0; s < STEPS; ++s) {
#if LANE_CHUNKS
      w[s][i] = w_t[tile * (STEPS * TK) + s * TK + t];
      const int c = min(chunk_of(t, s), KC - 1);
#else
      const int c = min(chunk_of(t, s), KC - 1);
      w[s][i] = w_t[tile * KC + c];
#endif
#if DIAG_LOADS == 2
      sc[s][i] = uvec2(0u);
#elif DIAG_LOADS == 4
      sc[s][i] = uvec2(0x3C003C00u);  // fp16 1.0 pairs: the arithmetic without the scale loads
#else
      if (s % RUN == 0) {
        sc[s][i] = s_t[tile * p.groups + c / per_group];
      } else {
        sc[s][i] = sc[s - 1][i];
      }
#endif
    }
  }
}

void gemv(int lid, int t, int set, int wg, int wgs, int KC, int per_group, int tiles, int sets_needed) {

  f16vec2 xs[STEPS][M][4];
  [[unroll]] for (int s = 0; s < STEPS; ++s) {
    const int c = chunk_of(t, s);
    [[unroll]] for (int m = 0; m < M; ++m) {
      pairs(c < KC ? x_h[m * KC + c] : uvec4(0u), xs[s][m]);
    }
  }

  uvec4 w[STEPS][TILES];
  uvec2 sc[STEPS][TILES];
  int base = wg * SETS;
  load_tile(min(base + set, sets_needed - 1), t, KC, per_group, tiles, w, sc);
  for (; base < sets_needed; base += wgs * SETS) {
    const int tile_set = base + set;
    const uvec4 wc[STEPS][TILES] = w;
    const uvec2 scc[STEPS][TILES] = sc;
    if (base + wgs * SETS < sets_needed) {
      load_tile(min(base + wgs * SETS + set, sets_needed - 1), t, KC, per_group, tiles, w, sc);
    }
    float acc[M][ROWS];
    [[unroll]] for (int m = 0; m < M; ++m) {
#if DIAG_LOADS == 2 || DIAG_LOADS == 3
      [[unroll]] for (int r = 0; r < ROWS; ++r) {
        acc[m][r] = 0.0;
      }
      [[unroll]] for (int s = 0; s < STEPS; ++s) {
        [[unroll]] for (int i = 0; i < TILES; ++i) {
          acc[m][4 * i] += float(wc[s][i].x + wc[s][i].y + wc[s][i].z + wc[s][i].w + scc[s][i].x + scc[s][i].y);
        }
      }
#elif ACC16
      // Each pair of rows summed in packed fp16 over the thread's STEPS chunks, scaled per chunk, converted once.
      [[unroll]] for (int i = 0; i < TILES; ++i) {
        f16vec2 e01 = f16vec2(0.0hf), e23 = f16vec2(0.0hf);
        [[unroll]] for (int s = 0; s < STEPS; ++s) {
          const f16vec2 d0 = dot8h(wc[s][i].x, xs[s][m]), d1 = dot8h(wc[s][i].y, xs[s][m]);
          const f16vec2 d2 = dot8h(wc[s][i].z, xs[s][m]), d3 = dot8h(wc[s][i].w, xs[s][m]);
          e01 = fma(f16vec2(d0.x, d1.x) + f16vec2(d0.y, d1.y), unpackFloat2x16(scc[s][i].x), e01);
          e23 = fma(f16vec2(d2.x, d3.x) + f16vec2(d2.y, d3.y), unpackFloat2x16(scc[s][i].y), e23);
        }
        acc[m][4 * i] = float(e01.x);
        acc[m][4 * i + 1] = float(e01.y);
        acc[m][4 * i + 2] = float(e23.x);
        acc[m][4 * i + 3] = float(e23.y);
      }
#else
      [[unroll]] for (int r = 0; r < ROWS; ++r) {
        acc[m][r] = 0.0;
      }
      [[unroll]] for (int s = 0; s < STEPS; ++s) {
        [[unroll]] for (int i = 0; i < TILES; ++i) {
          const vec2 s01 = unpackHalf2x16(scc[s][i].x), s23 = unpackHalf2x16(scc[s][i].y);
          acc[m][4 * i] += dot8(wc[s][i].x, xs[s][m]) * s01.x;
          acc[m][4 * i + 1] += dot8(wc[s][i].y, xs[s][m]) * s01.y;
          acc[m][4 * i + 2] += dot8(wc[s][i].z, xs[s][m]) * s23.x;
          acc[m][4 * i + 3] += dot8(wc[s][i].w, xs[s][m]) * s23.y;
        }
      }
#endif
    }
    finish(t, tile_set, sets_needed, acc);
  }
#if DIAG_LOADS
  if (p.K == -12345) {  // never: keeps every binding declared, as the host binds them
    out_f[0] = float(x_h[0].x) + float(s_t[0].x);
  }
#endif
}
#else
void gemv(int lid, int t, int set, int wg, int wgs, int KC, int per_group, int tiles, int sets_needed) {

#if ACT_SHARED
  for (int i = lid; i < M * KC; i += LOCAL) {
    x_sh[i] = x_h[i];
  }
  barrier();
#endif

  // Grid-stride over tile sets; the bound is uniform in a work group (its barriers), sets past the end compute on
  // the last tile and store nothing.
  for (int base = wg * SETS; base < sets_needed; base += wgs * SETS) {
    const int tile_set = base + set;
    int tile[TILES];
    [[unroll]] for (int i = 0; i < TILES; ++i) {
      tile[i] = min(tile_set * TILES + i, tiles - 1);
    }
    float acc[M][ROWS];
    [[unroll]] for (int m = 0; m < M; ++m) {
      [[unroll]] for (int r = 0; r < ROWS; ++r) {
        acc[m][r] = 0.0;
      }
    }

    int c = t;
#if PREFETCH
    // A ring of UNROLL steps: the loads of step c + UNROLL·TK are issued before step c is computed, so every
    // thread keeps UNROLL steps of weights, scales and activations in flight while it computes.
    uvec4 wq[UNROLL][TILES];
    uvec2 sq[UNROLL][TILES];
    uvec4 xq[UNROLL][M];
    [[unroll]] for (int u = 0; u < UNROLL; ++u) {
      load_step(min(c + u * TK, KC - 1), KC, per_group, tile, wq[u], sq[u], xq[u]);
    }
    for (; c < KC; c += UNROLL * TK) {
      [[unroll]] for (int u = 0; u < UNROLL; ++u) {
        const int cc = c + u * TK;
        const uvec4 w[TILES] = wq[u];
        const uvec2 sc[TILES] = sq[u];
        const uvec4 h[M] = xq[u];
        if (cc + UNROLL * TK < KC) {
          load_step(cc + UNROLL * TK, KC, per_group, tile, wq[u], sq[u], xq[u]);
        }
        if (cc < KC) {
          accumulate(h, w, sc, acc);
        }
      }
    }
#else
#if UNROLL > 1
    for (; c + (UNROLL - 1) * TK < KC; c += UNROLL * TK) {
      uvec4 w[UNROLL][TILES];
      uvec2 sc[UNROLL][TILES];
      uvec4 h[UNROLL][M];
      [[unroll]] for (int u = 0; u < UNROLL; ++u) {
        load_step(c + u * TK, KC, per_group, tile, w[u], sc[u], h[u]);
      }
      [[unroll]] for (int u = 0; u < UNROLL; ++u) {
        accumulate(h[u], w[u], sc[u], acc);
      }
    }
#endif
    for (; c < KC; c += TK) {
      uvec4 w[TILES];
      uvec2 sc[TILES];
      uvec4 h[M];
      load_step(c, KC, per_group, tile, w, sc, h);
      accumulate(h, w, sc, acc);
    }
#endif

    finish(t, tile_set, sets_needed, acc);
  }
#if DIAG_LOADS
  if (p.K == -12345) {  // never: keeps the activation and scale bindings declared, as the host binds them
    out_f[0] = float(x_h[0].x) + float(s_t[0].x);
  }
#endif
}
#endif

void main() {
  const int lid = int(gl_LocalInvocationID.x);
  const int tiles = (p.N + 3) / 4;
  gemv(lid, lid % TK, lid / TK,                                          // thread along K, tile set in the group
       int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x),   // the group, of
       int(gl_NumWorkGroups.x * gl_NumWorkGroups.y),                     // this many (grid-stride)
       p.K / 8, p.group_size / 8, tiles, (tiles + TILES - 1) / TILES);   // chunks a row and a group, tiles, sets
}
