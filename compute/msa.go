package compute

// MSA is what MiniMax-M3's block-sparse attention and its SwiGLU-OAI
// feed-forwards need beyond the Backend's ops and compute.Causal
// (spec/models/minimax-m3.md): the lightning indexer's block selection over
// a paged append cache of indexer keys, GQA attention restricted to the
// chosen key blocks, and the clamped "SwiGLU-OAI" activation in a dense FFN
// and in sigmoid-routed experts. It is not part of Backend: a model that
// needs it asserts it at load (the CPU backend implements it).
type MSA interface {
	// BlockSelect first writes this step's indexer keys into the cache,
	// K[t] into slot pos[t] of the token's span, then chooses for every
	// token t and indexer head h the key blocks its queries see (keys
	// read back from the cache, through its format):
	//
	//	score[j] = Q_h[t]·key_j (float32 dot, no scale), j ≤ pos[t]
	//	bs[b]    = max over j in block b (j in [b·Block, (b+1)·Block), j ≤ pos[t])
	//	local    = blocks floor(pos/Block) − i for i < Local (clamped at 0)
	//
	// The local blocks are always kept; the remaining TopK − |local| places
	// go to the other blocks with the largest bs (equal scores: the lower
	// block first). While a token has at most TopK blocks it keeps all of
	// them. Sel[t][h·TopK : h·TopK+N[t][h]] gets the kept block ids in
	// ascending order. Local is at most TopK.
	BlockSelect(a *BlockSelectArgs, sp Spans)
	// BlockSparseAttention is CausalAttention (see Causal) whose query head
	// h at token t sees only the keys j ≤ pos[t] in the blocks
	// Sel[t][s·TopK : s·TopK+N[t][s]] of selection head s = h /
	// (Heads/SelHeads): it first writes this step's keys and values into
	// the cache, then computes
	//
	//	Out_h = Σ_j softmax_j(Scale · Q_h·K_j) V_j     (KV head h/(Heads/KVHeads))
	//
	// with the dot products in float32, the softmax's exponentials summed
	// in float64 and the values summed in position order, so that a
	// token's output does not depend on the batch or on how its sequence
	// was split into steps.
	BlockSparseAttention(a *BlockSparseArgs, sp Spans)
	// SwiGLUOAI computes y = W2·act(W1·x, W3·x) for every row of x, with
	// act(g, u) = (clamp(u, −L, L) + 1) · g'·sigmoid(α·g'), g' = min(g, L)
	// (sigmoid in float64, rounded to float32).
	SwiGLUOAI(y, x Tensor, w *SwiGLU, alpha, limit float32)
	// MoEOAI is Experts.MoE with the SwiGLU-OAI activation (MoEArgs.Limit
	// its L) in every routed expert and the shared one: the router scores
	// s = Scoring(Gate·x), the K largest s + Bias chosen, their s divided
	// by their sum (plus 1e-20) times RoutedScale, and y = Σ_k w_k ·
	// expert_k(x) (summed in expert order) + shared(x). Tid2Eid and
	// SharedGate must be unset.
	MoEOAI(y, x Tensor, a *MoEArgs, alpha float32)
}

// BlockSelectArgs are one lightning indexer's inputs.
type BlockSelectArgs struct {
	Q Tensor // F32 [T, Heads·Dim]: the rotated indexer queries
	K Tensor // F32 [T, Dim]: this step's rotated indexer keys
	// Keys is the append cache: slot p holds position p's key (Width
	// Dim, f32 or bf16).
	Keys               Paged
	Heads, Dim         int
	Block, TopK, Local int
	Sel                Tensor // I32 [T, Heads·TopK]
	N                  Tensor // I32 [T, Heads]
}

// BlockSparseArgs are one block-sparse attention's inputs: a causal
// attention's, and the selection BlockSelect made.
type BlockSparseArgs struct {
	CausalArgs
	Sel, N         Tensor // BlockSelect's, with SelHeads heads of TopK
	SelHeads, TopK int
	Block          int
}
