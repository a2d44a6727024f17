"""hf_decode.py CKPT [STEPS]: HF transformers' DeepseekV4ForCausalLM (bf16, on
the GPU) on a checkpoint strata wrote in the released naming and formats
(FP8 e4m3 with 128x128 UE8M0 block scales, packed FP4 experts with per-32
UE8M0 scales): the weights are dequantized exactly (as
shared/tools/golden/gen_dsv4.py writes them, inverted) and rounded to bf16.
Prints the decode step time at batch 1, 8 and 64 (HF_BATCHES) after a 128-token prompt:
(time of generate(N2) - time of generate(N1)) / (N2 - N1), greedy.
"""
import json, os, sys, time
import torch
from safetensors import safe_open
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

ckpt = sys.argv[1]
oc = json.load(open(f"{ckpt}/config.json"))
idx = json.load(open(f"{ckpt}/model.safetensors.index.json"))["weight_map"]
L, E, I = oc["num_hidden_layers"], oc["n_routed_experts"], oc["moe_intermediate_size"]
ratios = oc["compress_ratios"][:L]
csa = 4
hca = max([r for r in ratios if r not in (0, csa)] or [128])
layer_types = ["sliding_attention" if r == 0 else ("compressed_sparse_attention" if r == csa else "heavily_compressed_attention") for r in ratios]
cfg = DeepseekV4Config(
    vocab_size=oc["vocab_size"], hidden_size=oc["hidden_size"], num_hidden_layers=L,
    num_attention_heads=oc["num_attention_heads"], num_key_value_heads=1, head_dim=oc["head_dim"],
    partial_rotary_factor=oc["qk_rope_head_dim"] / oc["head_dim"], q_lora_rank=oc["q_lora_rank"],
    o_groups=oc["o_groups"], o_lora_rank=oc["o_lora_rank"], index_n_heads=oc["index_n_heads"],
    index_head_dim=oc["index_head_dim"], index_topk=oc["index_topk"], n_routed_experts=E,
    num_experts_per_tok=oc["num_experts_per_tok"], moe_intermediate_size=I, n_shared_experts=1,
    hc_mult=oc["hc_mult"], hc_sinkhorn_iters=oc["hc_sinkhorn_iters"], hc_eps=oc["hc_eps"],
    sliding_window=oc["sliding_window"],
    compress_rates={"compressed_sparse_attention": csa, "heavily_compressed_attention": hca},
    layer_types=layer_types,
    mlp_layer_types=["hash_moe" if i < oc["num_hash_layers"] else "moe" for i in range(L)],
    routed_scaling_factor=oc["routed_scaling_factor"], swiglu_limit=oc["swiglu_limit"],
    scoring_func=oc["scoring_func"], rope_theta=float(oc["rope_theta"]), compress_rope_theta=float(oc["compress_rope_theta"]),
    rope_parameters={"rope_type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
    max_position_embeddings=oc["max_position_embeddings"], rms_norm_eps=oc["rms_norm_eps"],
    num_nextn_predict_layers=0, bos_token_id=0, eos_token_id=1, tie_word_embeddings=False)

t0 = time.time()
torch.set_default_dtype(torch.bfloat16)
with torch.device("cuda"):
    model = DeepseekV4ForCausalLM(cfg)
model.eval()
torch.set_default_dtype(torch.float32)
sd = model.state_dict()
print(f"HF built {sum(p.numel() for p in model.parameters())/1e9:.2f}B parameters in {time.time()-t0:.1f}s", flush=True)

FP4 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], device="cuda")

def deq(f, name):
    w = f.get_tensor(name)
    sname = name[: -len(".weight")] + ".scale" if name.endswith(".weight") else None
    if sname and sname in idx:
        s = open_file(sname).get_tensor(sname).float()
        if w.dtype == torch.int8:  # packed fp4, low nibble first
            p = w.view(torch.uint8).int()
            code = torch.stack([p & 15, p >> 4], dim=-1).reshape(w.shape[0], -1)
            v = FP4[code & 7] * torch.where(code >= 8, -1.0, 1.0)
            return v * s.repeat_interleave(32, 1)
        R, C = w.shape
        br, bc = -(-R // s.shape[0]), -(-C // s.shape[1])
        return w.float() * s.repeat_interleave(br, 0)[:R].repeat_interleave(bc, 1)[:, :C]
    return w

files = {}
def open_file(name):
    fn = idx[name]
    if fn not in files:
        files[fn] = safe_open(f"{ckpt}/{fn}", framework="pt", device="cuda")
    return files[fn]

top = {"embed.weight": "model.embed_tokens.weight", "head.weight": "lm_head.weight", "norm.weight": "model.norm.weight",
       "hc_head_fn": "model.hc_head.hc_fn", "hc_head_base": "model.hc_head.hc_base", "hc_head_scale": "model.hc_head.hc_scale"}
sub = [("attn_norm.weight", "input_layernorm.weight"), ("ffn_norm.weight", "post_attention_layernorm.weight"),
       ("attn.indexer.compressor.wkv.", "self_attn.compressor.indexer.kv_proj."),
       ("attn.indexer.compressor.wgate.", "self_attn.compressor.indexer.gate_proj."),
       ("attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"),
       ("attn.indexer.compressor.norm.", "self_attn.compressor.indexer.kv_norm."),
       ("attn.indexer.wq_b.", "self_attn.compressor.indexer.q_b_proj."),
       ("attn.indexer.weights_proj.", "self_attn.compressor.indexer.scorer.weights_proj."),
       ("attn.compressor.wkv.", "self_attn.compressor.kv_proj."), ("attn.compressor.wgate.", "self_attn.compressor.gate_proj."),
       ("attn.compressor.ape", "self_attn.compressor.position_bias"), ("attn.compressor.norm.", "self_attn.compressor.kv_norm."),
       ("attn.wq_a.", "self_attn.q_a_proj."), ("attn.q_norm.", "self_attn.q_a_norm."), ("attn.wq_b.", "self_attn.q_b_proj."),
       ("attn.wkv.", "self_attn.kv_proj."), ("attn.kv_norm.", "self_attn.kv_norm."), ("attn.wo_a.", "self_attn.o_a_proj."),
       ("attn.wo_b.", "self_attn.o_b_proj."), ("attn.attn_sink", "self_attn.sinks"),
       ("ffn.gate.weight", "mlp.gate.weight"), ("ffn.gate.tid2eid", "mlp.gate.tid2eid"), ("ffn.gate.bias", "mlp.gate.e_score_correction_bias"),
       ("ffn.shared_experts.w1.", "mlp.shared_experts.gate_proj."), ("ffn.shared_experts.w2.", "mlp.shared_experts.down_proj."),
       ("ffn.shared_experts.w3.", "mlp.shared_experts.up_proj."),
       ("hc_attn_fn", "attn_hc.fn"), ("hc_attn_base", "attn_hc.base"), ("hc_attn_scale", "attn_hc.scale"),
       ("hc_ffn_fn", "ffn_hc.fn"), ("hc_ffn_base", "ffn_hc.base"), ("hc_ffn_scale", "ffn_hc.scale")]

done, skipped = set(), []
def put(key, v, sl=None):
    if key not in sd:
        skipped.append(f"{key} (not in the HF model)")
        return
    dst = sd[key] if sl is None else sd[key][sl]
    if dst.shape != v.shape:
        skipped.append(f"{key} {tuple(v.shape)} vs {tuple(dst.shape)}")
        return
    dst.copy_(v.to(dst.dtype))
    done.add(key)

def load():
  with torch.no_grad():
    for name in idx:
        if name.endswith(".scale") and name[: -len(".scale")] + ".weight" in idx:
            continue
        if name in top:
            put(top[name], deq(open_file(name), name)); continue
        if not name.startswith("layers."):
            continue
        parts = name.split(".", 2)
        i, rest = parts[1], parts[2]
        if int(i) >= L:
            continue
        p = f"model.layers.{i}."
        if rest.startswith("ffn.experts."):
            _, _, e, w, _ = rest.split(".")
            e, v = int(e), deq(open_file(name), name)
            if w == "w1": put(p + "mlp.experts.gate_up_proj", v, (e, slice(0, I)))
            elif w == "w3": put(p + "mlp.experts.gate_up_proj", v, (e, slice(I, 2 * I)))
            else: put(p + "mlp.experts.down_proj", v, e)
            continue
        for a, b in sub:
            if rest.startswith(a):
                put(p + b + rest[len(a):], deq(open_file(name), name)); break
        else:
            skipped.append(name)
t0 = time.time()
try:
    load()
except Exception as ex:  # the timing stands on random weights of the same shapes
    print(f"HF checkpoint load FAILED ({type(ex).__name__}: {ex}); timing the random-initialized model of the same shapes", flush=True)
torch.cuda.synchronize()
missing = [k for k in sd if k not in done]
print(f"HF loaded {len(done)} tensors in {time.time()-t0:.1f}s; skipped {len(skipped)}: {skipped[:6]}; left random {len(missing)}: {missing[:6]}", flush=True)

V = cfg.vocab_size
g = torch.Generator(device="cuda").manual_seed(1)
res = {}
for B in [int(b) for b in os.environ.get("HF_BATCHES", "1,8,64").split(",")]:
    ids = torch.randint(2, V, (B, 128), device="cuda", generator=g)
    def run(n):
        torch.cuda.synchronize(); t = time.time()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                                 do_sample=False, pad_token_id=0, eos_token_id=None)
        torch.cuda.synchronize()
        assert out.shape[1] == 128 + n, out.shape
        return time.time() - t
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    try:
        run(4)
        a, b = run(8), run(8 + n)
    except Exception as ex:
        print(f"HF decode batch {B} FAILED: {type(ex).__name__}: {ex}", flush=True)
        continue
    ms = 1e3 * (b - a) / n
    res[B] = ms
    print(f"HF decode batch {B}: {ms:.2f} ms/step, {B*1e3/ms:.0f} tokens/s (128-token prompt)", flush=True)
print("HFRESULT " + json.dumps(res))
