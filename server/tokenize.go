package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/strata-inference/strata/tokenizer/chat"
)

// POST /tokenize and POST /detokenize, as vLLM serves them, with the
// server's own tokenizer and chat format: a client counts and inspects
// tokens exactly as a generation request would make them.

type tokenizeRequestJSON struct {
	Model            *string       `json:"model"`
	Prompt           *string       `json:"prompt"`
	Messages         []messageJSON `json:"messages"`
	Tools            []chat.Tool   `json:"tools"`
	AddSpecialTokens *bool         `json:"add_special_tokens"`
	ReturnTokenStrs  *bool         `json:"return_token_strs"`
	// Thinking mode, asked for as in a chat request.
	ReasoningEffort    *string                    `json:"reasoning_effort"`
	Thinking           *thinkingJSON              `json:"thinking"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
}

type detokenizeRequestJSON struct {
	Model             *string `json:"model"`
	Tokens            []int64 `json:"tokens"`
	SkipSpecialTokens *bool   `json:"skip_special_tokens"`
}

// tokenizeRequest is a validated /tokenize request: a prompt, tokenized
// as /v1/completions does (BOS first when add_special_tokens and the
// tokenizer say so), or messages, rendered and tokenized as
// /v1/chat/completions does.
type tokenizeRequest struct {
	Model      string
	Prompt     *string
	Messages   []chat.Message
	Tools      []chat.Tool
	Chat       ChatOptions
	AddSpecial bool
	TokenStrs  bool
}

// decodeTokenizeRequest decodes and validates a /tokenize body.
func decodeTokenizeRequest(data []byte) (*tokenizeRequest, *apiError) {
	var j tokenizeRequestJSON
	if err := decodeJSON(data, &j); err != nil {
		return nil, err
	}
	req := &tokenizeRequest{AddSpecial: true}
	if j.Model != nil {
		req.Model = *j.Model
	}
	if v := j.AddSpecialTokens; v != nil {
		req.AddSpecial = *v
	}
	req.TokenStrs = j.ReturnTokenStrs != nil && *j.ReturnTokenStrs
	switch {
	case j.Prompt != nil && j.Messages != nil:
		return nil, invalidf("messages", "invalid_value", "give prompt or messages, not both.")
	case j.Prompt != nil:
		if j.Tools != nil || j.ReasoningEffort != nil || j.Thinking != nil || j.ChatTemplateKwargs != nil {
			return nil, invalidf("prompt", "invalid_value", "tools and thinking options apply to messages, not to a prompt.")
		}
		req.Prompt = j.Prompt
		return req, nil
	case j.Messages == nil:
		return nil, invalidf("prompt", "missing_required_parameter", "prompt or messages is required.")
	}
	var err *apiError
	if req.Messages, req.Tools, err = decodeConversation(j.Messages, j.Tools); err != nil {
		return nil, err
	}
	cj := chatRequestJSON{ReasoningEffort: j.ReasoningEffort, Thinking: j.Thinking, ChatTemplateKwargs: j.ChatTemplateKwargs}
	if req.Chat, err = decodeThinking(&cj); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeDetokenizeRequest decodes and validates a /detokenize body; ids
// must be below vocab.
func decodeDetokenizeRequest(data []byte, vocab int) (model string, ids []int32, skipSpecial bool, aerr *apiError) {
	var j detokenizeRequestJSON
	if err := decodeJSON(data, &j); err != nil {
		return "", nil, false, err
	}
	if j.Model != nil {
		model = *j.Model
	}
	if j.Tokens == nil {
		return "", nil, false, invalidf("tokens", "missing_required_parameter", "tokens is required.")
	}
	ids = make([]int32, 0, len(j.Tokens))
	if len(j.Tokens) > 0 {
		if ids, aerr = tokenIDs(j.Tokens, vocab, "tokens"); aerr != nil {
			return "", nil, false, aerr
		}
	}
	return model, ids, j.SkipSpecialTokens != nil && *j.SkipSpecialTokens, nil
}

// checkModel accepts an absent model name or the served one.
func (s *Server) checkModel(name string) *apiError {
	if name != "" && name != s.opt.ModelName {
		return modelNotFound(name, s.opt.ModelName)
	}
	return nil
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	req, aerr := decodeTokenizeRequest(body)
	if aerr == nil {
		aerr = s.checkModel(req.Model)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var toks []int32
	if req.Prompt != nil {
		if req.AddSpecial && s.tok.AddBOS() {
			toks = append(toks, s.tok.BOS())
		}
		toks = append(toks, s.tok.Encode(*req.Prompt, true)...)
	} else {
		text, err := s.format.Render(req.Messages, req.Tools, req.Chat)
		if err != nil {
			writeError(w, invalidf("messages", "invalid_value", "The conversation cannot be rendered as a %s prompt: %v.", s.format.Name(), err))
			return
		}
		toks = s.tok.Encode(text, true)
	}
	out := map[string]any{"count": len(toks), "max_model_len": s.maxContext, "tokens": toks}
	if toks == nil {
		out["tokens"] = []int32{}
	}
	if req.TokenStrs {
		strs := make([]string, len(toks))
		for i, t := range toks {
			strs[i], _ = s.tokenString(t)
		}
		out["token_strs"] = strs
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	model, ids, skip, aerr := decodeDetokenizeRequest(body, s.eng.Model().VocabSize())
	if aerr == nil {
		aerr = s.checkModel(model)
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if n := s.tok.VocabSize(); n < s.eng.Model().VocabSize() {
		for i, id := range ids {
			if int(id) >= n {
				writeError(w, invalidf(fmt.Sprintf("tokens[%d]", i), "invalid_value", "token id %d is outside the tokenizer's %d ids.", id, n))
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"prompt": s.tok.Decode(ids, skip)})
}
