package compute

// MLA is what multi-head latent attention with DeepSeek Sparse Attention
// needs beyond the Backend's ops (DeepSeek-V3.2 and GLM-5, spec/models/
// deepseek-v3.2.md): the absorbed query product, the indexer's RoPE and
// key norm, attention over a paged cache of latents, and MoE with
// group-limited routing. The DSA indexer's scoring and top-k is the
// Backend's IndexerSelect with Rate 1 (one key per token).
//
// A model of these families checks at load that its backend implements
// MLA (and Gating); the CPU backend does.
type MLA interface {
	// HeadMatMul computes, for every head h of ws (each R×n), y[t][h·R :
	// (h+1)·R] = ws[h] · x[t][h·w : h·w+n] with w = x.Cols/len(ws) ≥ n: a
	// per-head product over the first n channels of each head's w-wide
	// group of x (MLA absorbs each head's key projection into the no-RoPE
	// part of its query this way). y is [T, len(ws)·R].
	HeadMatMul(y, x Tensor, ws []*Matrix)
	// RoPELeading rotates, in every row r of x, the first R =
	// 2·invFreq.Len() channels by the angles pos[r/heads]·invFreq[j]
	// (float32 product; cosine and sine in float64, rounded to float32):
	// channel pairs (2j, 2j+1), or, when half, channel j with channel
	// j + R/2 (rotate-half). The other channels are left alone. pos is I32
	// with one entry per heads rows.
	RoPELeading(x, pos Tensor, heads int, invFreq Tensor, half bool)
	// LayerNorm computes, for every row of x, y = (x − mean(x)) /
	// sqrt(var(x) + eps) ⊙ w + b, var the biased variance, in float32
	// with float64 sums. y may alias x.
	LayerNorm(y, x, w, b Tensor, eps float32)
	// LatentAttention first writes this step's latents into the cache:
	// slot pos[t] of token t's span gets [Lat[t] | KRope[t]]. It then
	// computes, for every token t and head h, over the key positions S of
	// t (Sel[t][:N[t]] when Sel is given, else 0..pos[t]), every latent
	// read back from the cache through its format:
	//
	//	logit_s = Scale·(QLat_h·lat_s + QRope_h·kpe_s)
	//	Out_h   = Σ_s softmax(logit)_s · lat_s
	//
	// logits dotted in float32, the softmax's exponentials summed in
	// float64, the latents summed in the order of S. A token's output
	// depends on its own inputs and its span's cache only.
	LatentAttention(a *LatentArgs, sp Spans)
	// RoutedMoE is MoE (see Experts) with DeepSeek-V3's group-limited
	// routing of the biased scores (see Routing); MoEArgs.Tid2Eid must
	// be unset.
	RoutedMoE(y, x, tokens Tensor, a *MoEArgs, r Routing)
}

// LatentArgs are one latent attention's inputs. Latent is the compressed
// KV width (kv_lora_rank) and Rope the shared RoPE key's width.
type LatentArgs struct {
	Out  Tensor // F32 [T, Heads·Latent]: Σ p·lat per head
	QLat Tensor // F32 [T, Heads·Latent]: each head's absorbed no-RoPE query
	// Q is F32 [T, Heads·w]: each head's w-wide query, whose last Rope
	// channels are its rotated RoPE part (w > Rope).
	Q     Tensor
	Lat   Tensor // F32 [T, Latent]: this step's normalized latents
	KRope Tensor // F32 [T, Rope]: this step's rotated RoPE keys
	// KV is the append cache: slot p holds position p's Latent + Rope
	// values in KV.Format (Width Latent+Rope, Rope trailing channels).
	KV Paged
	// Sel and N (IndexerSelect's, positions) restrict each token's keys;
	// zero: every position up to the token's.
	Sel, N              Tensor
	Heads, Latent, Rope int
	Scale               float32
}

// Routing is how RoutedMoE chooses a token's K experts (the "noaux"
// routing of DeepSeek-V3, V3.2 and GLM-5): with s the router's scores
// (MoEArgs.Scoring of Gate·x) and c = s + Bias, the E experts fall into
// Groups equal groups of consecutive experts, each group scored by the
// sum of its two largest c; only the experts of the TopGroups best groups
// compete, and the K largest c among them are chosen. Their weights are
// their s, divided by their sum (plus 1e-20) unless Unnormalized, times
// RoutedScale. Groups 1 is plain top-K routing.
type Routing struct {
	Groups, TopGroups int
	Unnormalized      bool
}
