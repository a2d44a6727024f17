# Writes testdata/reference and testdata/sharded with the reference
# implementation, for reference_test.go. Run from the safetensors folder on a
# machine with torch, safetensors and transformers (made with torch 2.11,
# safetensors 0.8.0, transformers 5.17):
#
#	python3 testdata/gen_reference.py testdata
import hashlib, json, os, sys
import torch
from safetensors.torch import save_file

out = sys.argv[1]
T2S = {torch.bool: "BOOL", torch.uint8: "U8", torch.int8: "I8", torch.float8_e4m3fn: "F8_E4M3",
       torch.float8_e5m2: "F8_E5M2", torch.float8_e8m0fnu: "F8_E8M0", torch.int16: "I16", torch.uint16: "U16",
       torch.float16: "F16", torch.bfloat16: "BF16", torch.int32: "I32", torch.uint32: "U32", torch.float32: "F32",
       torch.int64: "I64", torch.uint64: "U64", torch.float64: "F64"}

def raw(t):
    t = t.contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""

def manifest(tensors, path):
    m = {k: {"dtype": T2S[v.dtype], "shape": list(v.shape), "sha256": hashlib.sha256(raw(v)).hexdigest()}
         for k, v in tensors.items()}
    json.dump(m, open(path, "w"), indent=1, sort_keys=True)

# Every dtype, as a scalar, a vector, a 3-d array and an empty array, random bytes.
g = torch.Generator().manual_seed(0)
tensors = {}
for dt, s in T2S.items():
    for j, shape in enumerate([(), (5,), (2, 3, 4), (0, 3)]):
        n = 1
        for d in shape:
            n *= d
        b = torch.randint(0, 256, (n * torch.empty((), dtype=dt).element_size(),), generator=g, dtype=torch.uint8)
        if dt == torch.bool:
            b = b & 1
        tensors[f"{s.lower()}.{j}"] = b.view(dt).reshape(shape) if n else torch.empty(shape, dtype=dt)
os.makedirs(f"{out}/reference", exist_ok=True)
save_file(tensors, f"{out}/reference/reference.safetensors", metadata={"format": "pt", "k": "v"})
manifest(tensors, f"{out}/reference/tensors.json")

# A tiny random Llama in bf16, saved in five shards with an index.
from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
                  num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False)
torch.manual_seed(0)
m = LlamaForCausalLM(cfg).to(torch.bfloat16)
m.save_pretrained(f"{out}/sharded", max_shard_size="4KB")
for f in ["config.json", "generation_config.json"]:
    os.remove(f"{out}/sharded/{f}")
manifest(m.state_dict(), f"{out}/sharded/tensors.json")
