"""Writes torch_zip.bin and torch_legacy.bin (the same state dict, saved by torch.save in the zip
format and with _use_new_zipfile_serialization=False) and torch_expected.json (each tensor's
name, dtype, shape and row-major values, as float64).

    ../../.venv/bin/python gen_torchbin.py      # from export/testdata (tools/pyenv/setup.sh)
"""
import json, os

import torch

here = os.path.dirname(os.path.abspath(__file__))
lin = torch.nn.Linear(3, 2)
with torch.no_grad():
    lin.weight.copy_(torch.tensor([[0.5, -1.25, 2.0], [3.0, 0.125, -0.75]]))
    lin.bias.copy_(torch.tensor([1.5, -2.5]))
sd = torch.nn.Sequential(lin).state_dict()  # an OrderedDict with _metadata, as model.state_dict()
base = torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4
sd["base"] = base
sd["base.t"] = base.t()                  # strided view of base's storage
sd["base.row1"] = base[1]                # offset view
sd["base.col2"] = base[:, 2]             # offset and stride
sd["tied"] = base                        # the same tensor again
sd["half"] = torch.tensor([1.5, -2.25, 65504, 6e-8, 0.0], dtype=torch.float16)
sd["bf16"] = torch.tensor([[1.0, -3.0], [0.1, 1e30]], dtype=torch.bfloat16)
sd["f64"] = torch.tensor([1 / 3, -2.0], dtype=torch.float64)
sd["ids"] = torch.arange(4, dtype=torch.int64)
sd["mask"] = torch.tensor([True, False, True])
sd["scalar"] = torch.tensor(7.5)
sd["empty"] = torch.zeros(0, 4)
sd["param"] = torch.nn.Parameter(torch.tensor([[2.0, 4.0]]))
torch.save(sd, os.path.join(here, "torch_zip.bin"))
torch.save(sd, os.path.join(here, "torch_legacy.bin"), _use_new_zipfile_serialization=False)
names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64",
         torch.int64: "I64", torch.bool: "BOOL"}
out = {"torch": torch.__version__, "tensors": [
    {"name": k, "dtype": names[v.dtype], "shape": list(v.shape),
     "values": [float(x) for x in v.detach().reshape(-1).double().tolist()]} for k, v in sd.items()]}
with open(os.path.join(here, "torch_expected.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
