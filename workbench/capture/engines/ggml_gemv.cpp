// The workbench's program for ggml's Vulkan backend (written here; ggml is the user's checkout, built at run time
// by workbench.toolchain.ggml and linked against): one matrix-vector product per line, each its own graph, computed
// by ggml_backend_vk in order, so a capture holds one GEMV (plus, on the integer-dot path, the activations'
// quantization; plus a bias add where ggml does not fuse it) per line.
//
//     ggml_gemv DIR        DIR/shapes.txt: one "K N TYPE BIAS" a line (TYPE q4_0 or f32 for the weights, BIAS 0/1);
//                          DIR/w<i>.f32: N rows of K floats; DIR/x<i>.f32: K floats; DIR/b<i>.f32: N floats (BIAS 1)
//                          writes DIR/q<i>.bin (the weights as ggml holds them: its own q4_0 blocks, or the floats)
//                          and DIR/y<i>.f32 (N floats)
//
// Exit 0 done, 2 no Vulkan device / bad input (one line on stderr). The check against an independent reference is
// the caller's (workbench.capture.engines.ggml): it decodes q<i>.bin itself and multiplies in float64.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-vulkan.h"

static bool read_floats(const std::string &path, std::vector<float> &out, size_t count) {
    std::ifstream f(path, std::ios::binary);
    out.resize(count);
    return f.read(reinterpret_cast<char *>(out.data()), count * sizeof(float)) && f.gcount() == (std::streamsize)(count * sizeof(float));
}

static bool write_bytes(const std::string &path, const void *data, size_t size) {
    std::ofstream f(path, std::ios::binary);
    return static_cast<bool>(f.write(reinterpret_cast<const char *>(data), size));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: ggml_gemv DIR (expected one folder argument, got %d)\n", argc - 1);
        return 2;
    }
    const std::string dir = argv[1];
    std::ifstream list(dir + "/shapes.txt");
    struct Line { long k, n; std::string type; int bias; };
    std::vector<Line> shapes;
    for (Line l; list >> l.k >> l.n >> l.type >> l.bias;) shapes.push_back(l);
    if (shapes.empty()) {
        std::fprintf(stderr, "expected lines \"K N TYPE BIAS\" in %s/shapes.txt, got none\n", dir.c_str());
        return 2;
    }
    if (ggml_backend_vk_get_device_count() < 1) {
        std::fprintf(stderr, "expected a Vulkan device for ggml's backend, got none\n");
        return 2;
    }
    ggml_backend_t backend = ggml_backend_vk_init(0);
    if (!backend) {
        std::fprintf(stderr, "expected ggml_backend_vk_init(0) to start device 0, it failed\n");
        return 2;
    }
    for (size_t i = 0; i < shapes.size(); ++i) {
        const long k = shapes[i].k, n = shapes[i].n;
        const bool q4 = shapes[i].type == "q4_0", bias = shapes[i].bias != 0;
        if (k <= 0 || n <= 0 || (q4 && k % 32 != 0) || (!q4 && shapes[i].type != "f32")) {
            std::fprintf(stderr, "expected K > 0 (a multiple of 32 for q4_0), N > 0, TYPE q4_0 or f32; got K=%ld N=%ld "
                         "TYPE=%s\n", k, n, shapes[i].type.c_str());
            return 2;
        }
        std::vector<float> w, x, bv, y(n);
        const std::string tag = std::to_string(i);
        if (!read_floats(dir + "/w" + tag + ".f32", w, size_t(k) * n) || !read_floats(dir + "/x" + tag + ".f32", x, k) ||
            (bias && !read_floats(dir + "/b" + tag + ".f32", bv, n))) {
            std::fprintf(stderr, "expected %s/w%s.f32 (%ld floats), x%s.f32 (%ld floats)%s, got short files\n",
                         dir.c_str(), tag.c_str(), k * n, tag.c_str(), k, bias ? " and b.f32 (N floats)" : "");
            return 2;
        }
        ggml_init_params params = {ggml_tensor_overhead() * 6 + ggml_graph_overhead(), nullptr, true};
        ggml_context *ctx = ggml_init(params);
        ggml_tensor *a = ggml_new_tensor_2d(ctx, q4 ? GGML_TYPE_Q4_0 : GGML_TYPE_F32, k, n);
        ggml_tensor *b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, k, 1);
        ggml_tensor *c = bias ? ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n) : nullptr;
        ggml_tensor *out = ggml_mul_mat(ctx, a, b);
        if (bias) out = ggml_add(ctx, out, c);
        ggml_cgraph *graph = ggml_new_graph(ctx);
        ggml_build_forward_expand(graph, out);
        ggml_backend_buffer_t buffer = ggml_backend_alloc_ctx_tensors(ctx, backend);
        std::vector<char> q(ggml_nbytes(a));
        if (q4) ggml_quantize_chunk(GGML_TYPE_Q4_0, w.data(), q.data(), 0, n, k, nullptr);
        else std::memcpy(q.data(), w.data(), q.size());
        ggml_backend_tensor_set(a, q.data(), 0, q.size());
        ggml_backend_tensor_set(b, x.data(), 0, x.size() * sizeof(float));
        if (bias) ggml_backend_tensor_set(c, bv.data(), 0, bv.size() * sizeof(float));
        if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) {
            std::fprintf(stderr, "expected ggml's graph (K=%ld N=%ld) to compute, it failed\n", k, n);
            return 2;
        }
        ggml_backend_tensor_get(out, y.data(), 0, y.size() * sizeof(float));
        if (!write_bytes(dir + "/q" + tag + ".bin", q.data(), q.size()) ||
            !write_bytes(dir + "/y" + tag + ".f32", y.data(), y.size() * sizeof(float))) {
            std::fprintf(stderr, "expected to write %s/q%s.bin and y%s.f32, could not\n", dir.c_str(), tag.c_str(), tag.c_str());
            return 2;
        }
        std::printf("K=%ld N=%ld computed\n", k, n);
        ggml_backend_buffer_free(buffer);
        ggml_free(ctx);
    }
    ggml_backend_free(backend);
    return 0;
}
