package main

import (
	"github.com/strata-inference/strata/model/kimilinear"
	"github.com/strata-inference/strata/model/minimaxm3"
	"github.com/strata-inference/strata/model/qwen35"
	"github.com/strata-inference/strata/server"
	"github.com/strata-inference/strata/tokenizer/chat"
)

// jinjaFormat is the chat format of a Jinja template for a model of
// architecture arch: Qwen3.5's template with its reply parser (reasoning,
// and tool calls in the XML or Qwen3's JSON form), Kimi Linear's with
// Kimi's (tool-call sections), else plain Jinja.
func jinjaFormat(arch string, t *chat.Template) server.ChatFormat {
	if arch == qwen35.Arch.Name {
		return server.Qwen35(t)
	}
	if arch == kimilinear.Arch.Name {
		return server.Kimi(t)
	}
	if arch == minimaxm3.Arch.Name {
		return server.MiniMax(t)
	}
	return server.Jinja(t)
}
