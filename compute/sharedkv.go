package compute

// SharedKV is attention whose keys and values one layer writes and other
// layers may read (Gemma 4's KV-shared layers), over a ring of the last
// Window positions (sliding-window layers) or an append cache (full
// attention), with keys optionally derived from the cached values (K=V
// layers, whose cache holds one vector per token and KV head). It is not
// part of Backend: a model that needs it asserts it at load.
type SharedKV interface {
	// RoPESplit rotates, in every row r of x (width n), channel j together
	// with channel j + n/2, for j < invFreq.Len() (at most n/2), by the
	// angle float32(pos[r/heads])·invFreq[j] (a float32 product; cosine and
	// sine in float64, rounded to float32):
	//
	//	x[j]     = x[j]·cos − x[j+n/2]·sin
	//	x[j+n/2] = x[j+n/2]·cos + x[j]·sin
	//
	// The channels j ≥ invFreq.Len() of either half are left alone (a
	// frequency of zero would leave them unchanged anyway). pos is I32 with
	// one entry per heads rows.
	RoPESplit(x, pos Tensor, heads int, invFreq Tensor)
	// StoreKV writes, for every span, the rows of k and v of its tokens
	// into the cache slot of each token's position p: slot p mod ring when
	// ring > 0 (only the span's last ring positions, which are the ones a
	// ring keeps), slot p when ring is 0. A slot holds k's row then v's
	// row in c's format; k may be the zero Tensor, and the slot then holds
	// v's row alone.
	StoreKV(c Paged, ring int, k, v Tensor, sp Spans)
	// SharedKVAttention computes every token's attention output (see
	// SharedKVArgs).
	SharedKVAttention(a *SharedKVArgs, sp Spans)
}

// SharedKVArgs are one attention's inputs. A token t at position p of a span
// whose first position is p0 attends to keys j from lo to p, where lo is
// max(0, p−Window+1) for a sliding window (Window > 0) and 0 otherwise. Key
// and value j come from the cache for j < p0 (slot j mod Window, or slot j)
// and from this step's K and V rows for j ≥ p0. With KFromV, key j is
// RoPESplit(KNorm ⊙ v_j) at position j, its cosines and sines read from
// KeyRope. Query head h reads KV head h / (Heads/KVHeads):
//
//	Out_h = Σ_j softmax_j(Scale · q_h·k_j) · v_j
//
// with the dot products summed in float32, the softmax's exponentials in
// float64 and the values accumulated in float32 in position order (a
// weight that rounds below float32's smallest normal contributes nothing),
// so that a token's output does not depend on the batch or on how its
// sequence was split into steps.
type SharedKVArgs struct {
	Out Tensor // F32 [T, Heads·Dim]
	Q   Tensor // F32 [T, Heads·Dim], normed and rotated
	// K and V are this step's keys and values, F32 [T, KVHeads·Dim], as the
	// cache gives them back (through its format). K is the zero Tensor with
	// KFromV.
	K, V Tensor
	// Cache holds the earlier positions: per slot K's row then V's row
	// (2·KVHeads·Dim values), or V's row alone with KFromV.
	Cache  Paged
	Window int // > 0: the sliding window, and the ring's size
	// Heads query heads, KVHeads key-value heads of Dim channels.
	Heads, KVHeads, Dim int
	Scale               float32
	// KFromV derives the keys from the values: k_j = RoPESplit(KNorm ⊙ v_j)
	// per KV head, rotating channel i with i + Dim/2 for i < KeyRope.Cols/2.
	KFromV bool
	KNorm  Tensor // F32 [Dim]
	// KeyRope is F32 [P, 2m]: row p holds cos(p·f_i) for i < m, then
	// sin(p·f_i), as RoPESplit computes them (angle a float32 product,
	// cosine and sine in float64 rounded to float32). P must exceed every
	// position of the step.
	KeyRope Tensor
}
