"""ET-VK's `q8ta_clone`: dispatched as its C++ does (one `make` per op)."""
from __future__ import annotations

from ..codegen import Codegen
from ..dispatch import (Dispatch, Resource, int8_decoder, int8_layout, io_block_configs, linear_blocks, nchw_sizes,
                        packed_words, random_int8, square_local)


def q8ta_clone(gen: Codegen, shape=(2, 10, 7, 9), *, in_layout: str = "4W4C", out_layout: str = "4C1W",
               seed: int = 0) -> Dispatch:
    """``add_q8ta_clone_node`` (Q8taClone.cpp): an int8x4 layout transition, one thread per 4×4 block."""
    sizes = nchw_sizes(shape)
    inp, out = int8_layout(in_layout), int8_layout(out_layout)
    q = random_int8(sizes, seed)
    in_cfg, out_cfg = io_block_configs(out, inp)
    global_size = linear_blocks(sizes, in_cfg)
    resources = [Resource("buffer", nbytes=4 * out.num_words(sizes), name="t_outp"),
                 Resource("buffer", packed_words(inp, q), name="t_inp"),
                 Resource("ubo", out.buffer_metadata(sizes), name="outp"),
                 Resource("ubo", inp.buffer_metadata(sizes), name="inp")]
    spec = {3: inp.spec_constant(), 4: out.spec_constant(), 5: in_cfg, 6: out_cfg}
    return Dispatch("q8ta_clone", "q8ta_clone", resources, b"", spec, global_size, square_local(global_size, in_cfg),
                    0, int8_decoder(out, sizes), q.clone(),
                    bytes_moved=4 * (inp.num_words(sizes) + out.num_words(sizes)),
                    params={"shape": "x".join(map(str, sizes)), "in_layout": inp.name, "out_layout": out.name})
