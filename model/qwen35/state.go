package qwen35

// State is one sequence's per-request state, held explicitly: exactly what
// the cache kinds of Config.CacheKinds describe, in float32.
type State struct {
	// Len is the number of tokens fed so far, the next token's position.
	Len int
	// Layers holds one entry per decoder layer.
	Layers []LayerState
}

// LayerState is one decoder layer's part of a State. A full-attention
// layer has K and V; a Gated DeltaNet layer has Conv and S.
type LayerState struct {
	// K and V are the keys and values of every token fed, [Len, Hkv·d]
	// each (RoPE applied to K): one row per token, written once (append).
	K, V []float32
	// Conv is the short convolution's input history, the last K-1 rows of
	// in_proj_qkv's output, [K-1, ConvDim], oldest first (recurrent:
	// overwritten wholesale every feed).
	Conv []float32
	// S is the delta rule's state, [Hv, dk, dv] (recurrent).
	S []float32
}

// NewState returns the state of an empty sequence: no keys, zero conv
// history and zero delta-rule state.
func (c *Config) NewState() *State {
	st := &State{Layers: make([]LayerState, len(c.Layers))}
	for i, k := range c.Layers {
		if k == Linear {
			st.Layers[i] = LayerState{
				Conv: make([]float32, (c.ConvKernel-1)*c.ConvDim()),
				S:    make([]float32, c.LinValueHeads*c.LinKeyDim*c.LinValueDim),
			}
		}
	}
	return st
}

// Clone returns a deep copy of s: feeding either leaves the other unchanged.
func (s *State) Clone() *State {
	c := &State{Len: s.Len, Layers: make([]LayerState, len(s.Layers))}
	for i, l := range s.Layers {
		c.Layers[i] = LayerState{
			K:    append([]float32(nil), l.K...),
			V:    append([]float32(nil), l.V...),
			Conv: append([]float32(nil), l.Conv...),
			S:    append([]float32(nil), l.S...),
		}
	}
	return c
}

// fits reports whether s has the shapes c's layers need.
func (c *Config) fits(s *State) bool {
	if len(s.Layers) != len(c.Layers) || s.Len < 0 {
		return false
	}
	kv := c.KVHeads * c.HeadDim
	for i, k := range c.Layers {
		l := &s.Layers[i]
		switch k {
		case Full:
			if len(l.K) != s.Len*kv || len(l.V) != s.Len*kv {
				return false
			}
		case Linear:
			if len(l.Conv) != (c.ConvKernel-1)*c.ConvDim() || len(l.S) != c.LinValueHeads*c.LinKeyDim*c.LinValueDim {
				return false
			}
		}
	}
	return true
}
