package server

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// BenchmarkResponsesContinuation measures one turn continuing a stored
// conversation of about 700 tokens with previous_response_id (one output
// token, so the time is the prompt's): with the prefix cache the
// conversation's state is restored from the snapshot its last response
// left; without it the whole prompt is computed. The ratio is what
// continuing through the prefix cache saves.
func BenchmarkResponsesContinuation(b *testing.B) {
	for _, noPrefix := range []bool{false, true} {
		b.Run(map[bool]string{false: "prefix cache", true: "no prefix cache"}[noPrefix], func(b *testing.B) {
			h := newHarness(b, func(c *harnessConfig) { c.noPrefix = noPrefix })
			ctx := context.Background()
			first, err := h.client.Responses.New(ctx, responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(300),
				Instructions: openai.String(strings.Repeat("In the beginning God created the heaven and the earth. ", 30)),
				Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("And the earth was without form, and void.")}},
				option.WithJSONSet("ignore_eos", true))
			if err != nil {
				b.Fatal(err)
			}
			next := responses.ResponseNewParams{Model: "strata-test", MaxOutputTokens: openai.Int(1), PreviousResponseID: openai.String(first.ID),
				Instructions: openai.String(strings.Repeat("In the beginning God created the heaven and the earth. ", 30)),
				Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("And God saw the light, that it was good.")}}
			var cached, prompt int64
			for b.Loop() {
				r, err := h.client.Responses.New(ctx, next)
				if err != nil {
					b.Fatal(err)
				}
				cached, prompt = r.Usage.InputTokensDetails.CachedTokens, r.Usage.InputTokens
			}
			b.ReportMetric(float64(cached), "cached_tokens")
			b.ReportMetric(float64(prompt), "prompt_tokens")
		})
	}
}
