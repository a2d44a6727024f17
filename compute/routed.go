package compute

// RoutedExperts is Experts.MoE in three parts, so that a token's experts
// can run on another device than the token (expert parallelism): Route
// where the tokens are, RunExperts where the experts are, Combine back
// where the tokens are. It is not part of Backend: a backend offers it if
// it can, and a model run across devices checks at load.
//
// The parts reproduce MoE bit for bit: Route picks the experts and weights
// MoE picks, RunExperts computes each row as MoE computes that token's
// expert (whatever other rows it is grouped with), and Combine adds the
// weighted expert outputs in MoE's order (by expert id, then k) before the
// shared expert.
type RoutedExperts interface {
	// Route writes, for every token t of x [T, D], its K experts idx[t]
	// (I32 [T, K], in the order MoE picks them: the token's row of
	// Tid2Eid, or the best biased scores first) and their routing weights
	// wt[t] (F32 [T, K]: the scores of the chosen experts, normalized,
	// times RoutedScale).
	Route(idx, wt, x, tokens Tensor, a *MoEArgs)
	// RunExperts writes y[i] = expert eid[i] of x[i] for every row i of x
	// [R, D] (eid is I32 [R]): a.Experts[eid[i]]'s SwiGLU, clamped by
	// a.Limit, each expert run once over all its rows. Only the experts
	// eid names need weights in a.Experts.
	RunExperts(y, x, eid Tensor, a *MoEArgs)
	// Combine writes y[t] = Σ_k wt[t,k]·ye[slot[t,k]] + shared(x[t]) for
	// every token t of x [T, D] (times sigmoid(SharedGate·x[t]) for the
	// shared part when SharedGate is set), the sum taken from zero in
	// ascending idx[t,k] (equal experts: ascending k): ye [S, D] holds the
	// expert outputs, slot (I32 [T, K]) says which row is token t's k-th.
	Combine(y, x, ye, idx, wt, slot Tensor, a *MoEArgs)
}
