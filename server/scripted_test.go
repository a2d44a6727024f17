package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/strata-inference/strata/cache"
	"github.com/strata-inference/strata/compute"
	"github.com/strata-inference/strata/compute/cpu"
	"github.com/strata-inference/strata/model"
	"github.com/strata-inference/strata/tokenizer"
)

// scriptedModel is a model.Model whose next token is chosen by a script
// from the tokens a sequence holds so far, so that tests can make the
// engine generate exact text (DeepSeek-V4's DSML tool calls, say) through
// the whole serving path: its logits are 0 except +30 on the scripted
// token, so greedy decoding and sampling alike pick it. The tokens live in
// the sequence's cache (one float32 slot per token), so prefix hits,
// preemption and hand-off carry them as they carry a real model's state.
//
// It is kept in this one file so that a change of the model.Model
// interface touches only it.
type scriptedModel struct {
	vocab  int
	script func(history []int32) int32
	be     *cpu.Backend
}

func (m *scriptedModel) Backend() compute.Backend {
	if m.be == nil {
		m.be = cpu.New(1)
	}
	return m.be
}

// scriptedLogit is the scripted token's logit; every other token's is 0.
const scriptedLogit = 30

func (m *scriptedModel) CacheSpecs() []cache.Spec {
	return []cache.Spec{{Name: "tokens", Layers: []int{0}, SlotBytes: 4, Policy: cache.Append, TokensPerSlot: 1}}
}

func (m *scriptedModel) NewSeq(pool *cache.Pool) (*cache.Seq, error) {
	return cache.NewSeq(pool, m.CacheSpecs())
}

func (m *scriptedModel) VocabSize() int { return m.vocab }

func (m *scriptedModel) Info() model.Info {
	return model.Info{Arch: "scripted", BOS: -1, EOS: -1, MaxContext: 1 << 20}
}

func (m *scriptedModel) Close() error { return nil }

// slot is the token a sequence holds at position i, in place.
func slot(seq *cache.Seq, i int) *int32 { return &cpu.I32(seq.Slot(0, 0, i).As(compute.I32))[0] }

// history is the tokens seq holds.
func history(seq *cache.Seq) []int32 {
	out := make([]int32, seq.Len())
	for i := range out {
		out[i] = *slot(seq, i)
	}
	return out
}

func (m *scriptedModel) Forward(ctx context.Context, b *model.Batch) ([]float32, error) {
	logits := make([]float32, 0, b.LogitRows()*m.vocab)
	for _, sp := range b.Spans {
		if err := sp.Seq.Reserve(sp.Seq.Len() + sp.Len); err != nil {
			return nil, err
		}
		rows := []int{}
		for i := range sp.Len {
			*slot(sp.Seq, sp.Seq.Len()+i) = b.Tokens[sp.Start+i]
			switch sp.Logits {
			case model.AllLogits:
				rows = append(rows, sp.Seq.Len()+i+1)
			case model.LastLogits:
				if i == sp.Len-1 {
					rows = append(rows, sp.Seq.Len()+i+1)
				}
			}
		}
		sp.Seq.Advance(sp.Len)
		h := history(sp.Seq)
		for _, n := range rows {
			row := make([]float32, m.vocab)
			next := m.script(h[:n])
			if next < 0 || int(next) >= m.vocab {
				return nil, fmt.Errorf("scripted model: token %d outside the vocabulary", next)
			}
			row[next] = scriptedLogit
			logits = append(logits, row...)
		}
	}
	return logits, nil
}

// replyScript makes a model reply with reply to every prompt: the reply
// starts after the last occurrence of the marker tokens (the chat format's
// "<｜Assistant｜>" and the think token after it) and ends with eos; a
// history without the marker gets eos.
func replyScript(marker, reply []int32, eos int32) func([]int32) int32 {
	return func(h []int32) int32 {
		at := -1
		for i := len(h) - len(marker); i >= 0; i-- {
			if slices.Equal(h[i:i+len(marker)], marker) {
				at = i + len(marker)
				break
			}
		}
		if at < 0 {
			return eos
		}
		if k := len(h) - at; k < len(reply) {
			return reply[k]
		}
		return eos
	}
}

// newScriptedHarness serves a scripted model that answers every chat with
// text (then EOS), tokenized by the test tokenizer as the engine would
// generate it; thinking says whether prompts end in "<think>" (else
// "</think>").
func newScriptedHarness(t *testing.T, text string, thinking bool, mods ...func(*harnessConfig)) *harness {
	t.Helper()
	tok, err := tokenizer.LoadDir(testModelDir)
	if err != nil {
		t.Fatal(err)
	}
	open := "</think>"
	if thinking {
		open = "<think>"
	}
	marker := tok.Encode("<｜Assistant｜>"+open, true)
	eos := tok.EOS()
	m := &scriptedModel{vocab: tok.VocabSize(), script: replyScript(marker, tok.Encode(text, true), eos)}
	return newHarness(t, append([]func(*harnessConfig){func(c *harnessConfig) {
		c.model, c.eos = m, eos
		c.pages = 4096
	}}, mods...)...)
}

// TestScriptedModel: the scripted model makes the engine generate exactly
// its reply: a chat completion's text is the reply, decoded back from the
// tokens the script chose.
func TestScriptedModel(t *testing.T) {
	const text = "The scripted reply, é世."
	h := newScriptedHarness(t, text, false)
	status, body := h.post("/v1/chat/completions", map[string]any{"model": "strata-test", "messages": []map[string]string{{"role": "user", "content": "hi"}}})
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var r struct {
		Choices []chatChoiceJSON
		Usage   usageJSON
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	if got := *r.Choices[0].Message.Content; got != text || r.Choices[0].FinishReason != "stop" {
		t.Fatalf("reply %q (finish %q), want %q", got, r.Choices[0].FinishReason, text)
	}
	if want := len(h.tok.Encode(text, true)) + 1; r.Usage.CompletionTokens != want {
		t.Fatalf("%d completion tokens, want the reply's %d and EOS", r.Usage.CompletionTokens, want-1)
	}
}
