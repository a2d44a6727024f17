package compute

// Causal is full causal attention over a paged append cache of keys and
// values with grouped query heads, and the partial rotate-half RoPE its
// queries and keys carry (Qwen3.5's gated full attention, spec §3).
type Causal interface {
	// RoPEHalf rotates, in every row r of x, channel j together with
	// channel j + R/2 of the first R = 2·invFreq.Len() channels by the
	// angle pos[r/heads]·invFreq[j] (float32 product; cosine and sine in
	// float64, rounded to float32):
	//
	//	x[j]       = x[j]·cos − x[j+R/2]·sin
	//	x[j+R/2]   = x[j+R/2]·cos + x[j]·sin
	//
	// The other channels are left alone. pos is I32 with one entry per
	// heads rows.
	RoPEHalf(x, pos Tensor, heads int, invFreq Tensor)
	// CausalAttention first writes this step's keys and values into the
	// cache, K[t] and V[t] into slot pos[t] of the token's span, then
	// computes every token's output over its span's positions 0..pos[t]
	// (all read back from the cache, through its format):
	//
	//	Out_h = softmax(Q_h·Kᵀ·Scale) V      (KV head h/(Heads/KVHeads))
	//
	// scores dotted in float32, the softmax's exponentials summed in
	// float64, the values summed in position order.
	CausalAttention(a *CausalArgs, sp Spans)
}

// CausalArgs are one causal attention's inputs.
type CausalArgs struct {
	Out  Tensor // F32 [T, Heads·Dim]
	Q    Tensor // F32 [T, Heads·Dim]
	K, V Tensor // F32 [T, KVHeads·Dim]: this step's
	// KV is the append cache: slot p holds position p's keys then values,
	// 2·KVHeads·Dim values in KV.Format (f32 or bf16).
	KV                  Paged
	Heads, KVHeads, Dim int
	Scale               float32
}
