package compute

// IndependentMixing is HY4's iHC (spec/models/hy4.md §2): C independent
// residual channels per token, h [T, C·D]. Each sublayer reads a weighted
// sum of the channels and adds its output back to every channel with a
// weight of its own; unlike DeepSeek-V4's mHC there is no channel-to-
// channel mixing and no Sinkhorn. The head collapses the channels with
// Mixing.HCHead (the same formula). A model of the family checks at load
// that its backend implements it; the CPU backend does.
type IndependentMixing interface {
	// IHCPre computes, for every token, with f its C·D channel values,
	//
	//	mix  = (Fn·f) · (mean(f²) + NormEps)^(-1/2)                [2C]
	//	pre  = sigmoid(mix[:C]·Scale[0] + Base[:C]) + Eps
	//	post = Magnitude·sigmoid(mix[C:]·Scale[1] + Base[C:]) + Eps
	//
	// and writes x [T, D] = Σ_c pre_c·h_c (channels in order) and post
	// [T, C], in float32 (the mean's sum in float64). w.Fn is [2C, C·D],
	// w.Base [2C], w.Scale [2].
	IHCPre(x, post, h Tensor, w *HC, p IHCParams)
	// IHCPost adds the sublayer's output y [T, D] to every channel:
	// h_c += post_c·y.
	IHCPost(h, y, post Tensor, p IHCParams)
}

// IHCParams are a model's iHC constants: C channels of width D, the RMS
// factor's eps (rms_norm_eps), the gates' floor (hc_eps) and the
// write-back gate's scale (hc_magnitude).
type IHCParams struct {
	HC, D                   int
	NormEps, Eps, Magnitude float32
}
