"""The field's ops (`workbench.capture.engines.field`: conv 3×3, conv 1×1, depthwise 3×3, linear at the shapes every
engine runs) as a float torch module lowered for ET-VK by its own partitioner (`lowering.lower` with a float
``torch.export`` program: no quantization), written as a program folder that `capture_join.capture_program`
captures on ET-VK's executor_runner (model.pte, input-0.bin, input-1.bin, reference.pt, summary.json).

    python -m workbench.etvk.model.field OUT [--executorch CHECKOUT]   # lowers in this process (ET-VK's Python
                                                                      # from the checkout, as `etvk lower` does)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ...capture.engines import field as spec


def torch_module():
    """(module, (x, v)): the field's ops with `spec.weights()`, the inputs `spec.inputs()`; returns (conv, linear)."""
    import torch
    from torch import nn

    class FieldOps(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv3x3 = nn.Conv2d(spec.C_IN, spec.C_OUT, 3, padding=1)
            self.conv1x1 = nn.Conv2d(spec.C_OUT, spec.C_OUT, 1)
            self.dwconv3x3 = nn.Conv2d(spec.C_OUT, spec.C_OUT, 3, padding=1, groups=spec.C_OUT)
            self.linear = nn.Linear(spec.FEATURES, spec.FEATURES)

        def forward(self, x, v):
            return self.dwconv3x3(self.conv1x1(self.conv3x3(x))), self.linear(v)

    model = FieldOps().eval()
    w = spec.weights()
    with torch.no_grad():
        for op in spec.OPS:
            layer = getattr(model, op)
            layer.weight.copy_(torch.from_numpy(w[f"{op}.w"]))
            layer.bias.copy_(torch.from_numpy(w[f"{op}.b"]))
    return model, tuple(torch.from_numpy(a) for a in spec.inputs())


def lower_field(out, executorch=None) -> Path:
    """Lower the field's module (float) with ET-VK's partitioner into the program folder `out`."""
    import torch
    from .revision import python_tree
    tree, commit, label = python_tree(executorch)
    import executorch.backends as backends
    if str(tree / "backends") not in backends.__path__:
        backends.__path__.insert(0, str(tree / "backends"))
    from . import lowering
    model, example = torch_module()
    exported = torch.export.export(model, example)
    lowered = lowering.lower(model, example, name="field_ops", exported=exported)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.pte").write_bytes(lowered.edge.to_executorch().buffer)
    with torch.no_grad():
        reference = list(model(*example))
    torch.save(reference, out / "reference.pt")
    names = []
    for i, x in enumerate(example):
        names.append(f"input-{i}.bin")
        (out / names[-1]).write_bytes(x.contiguous().numpy().tobytes())
    summary = {"model": "field_ops", "commit": commit, "revision": label, "input_files": names,
               "input_shapes": [list(x.shape) for x in example], "input_dtypes": [str(x.dtype) for x in example],
               "output_shapes": [list(r.shape) for r in reference], "cpu_ops": lowered.cpu_ops(),
               "counts": lowered.counts()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    return out


def main(argv=None) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="python -m workbench.etvk.model.field", description=__doc__.split("\n")[0])
    parser.add_argument("out")
    parser.add_argument("--executorch", default=None, help="ExecuTorch checkout (default $WORKBENCH_EXECUTORCH)")
    args = parser.parse_args(argv)
    try:
        out = lower_field(args.out, args.executorch)
    except (ImportError, ValueError, RuntimeError) as exc:
        print(f"field ops for ET-VK: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(f"lowered the field's ops for ET-VK into {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
