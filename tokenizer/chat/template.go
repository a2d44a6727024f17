package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// ErrNoTemplate is returned by NewTemplateFromConfig when the configuration
// has no chat_template.
var ErrNoTemplate = errors.New("chat: tokenizer_config.json has no chat_template")

// Template renders conversations with a model's Jinja chat template (the
// chat_template of its tokenizer_config.json), the way Hugging Face
// transformers' apply_chat_template does. A Template is safe for concurrent
// use.
//
// Rendering uses github.com/ardanlabs/jinja, which provides what common chat
// templates use (loop variables, namespace, raise_exception, strftime_now,
// tojson, string methods such as strip and startswith). Known differences
// from Python's Jinja2 as transformers sets it up: tojson writes floats in
// Go's %g form, so a whole float loses its ".0" (1.0 becomes "1", 1e15
// "1e+15") where Python keeps it, escapes U+2028 and U+2029, and with indent
// follows Go's encoding/json; integers beyond 64 bits become floats; and
// filters and globals cannot be added.
type Template struct {
	tmpl *jinja.Template
	vars map[string]any // special tokens from the configuration
}

// NewTemplate compiles a chat template.
func NewTemplate(src string) (*Template, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	return &Template{tmpl: t}, nil
}

// NewTemplateFromConfig compiles the chat template of a tokenizer_config.json.
// A chat_template given as a list of named templates contributes the one
// named "default". The configuration's special tokens (bos_token, eos_token,
// unk_token, pad_token, sep_token, cls_token, mask_token), given as strings
// or as {"content": ...} objects, become template variables, as transformers
// passes them. It returns ErrNoTemplate if there is no chat template.
func NewTemplateFromConfig(tokenizerConfig []byte) (*Template, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(tokenizerConfig, &cfg); err != nil {
		return nil, fmt.Errorf("chat: tokenizer_config.json: %w", err)
	}
	raw, ok := cfg["chat_template"]
	if !ok || string(raw) == "null" {
		return nil, ErrNoTemplate
	}
	var src string
	if err := json.Unmarshal(raw, &src); err != nil {
		var named []struct{ Name, Template string }
		if err := json.Unmarshal(raw, &named); err != nil {
			return nil, fmt.Errorf("chat: tokenizer_config.json: chat_template is neither a string nor a list of named templates")
		}
		for _, n := range named {
			if n.Name == "default" {
				src = n.Template
			}
		}
		if src == "" {
			return nil, ErrNoTemplate
		}
	}
	t, err := NewTemplate(src)
	if err != nil {
		return nil, err
	}
	t.vars = map[string]any{}
	for _, name := range []string{"bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token", "mask_token"} {
		var tok struct {
			Content string `json:"content"`
		}
		var s string
		switch r := cfg[name]; {
		case len(r) == 0 || string(r) == "null":
		case json.Unmarshal(r, &s) == nil:
			t.vars[name] = s
		case json.Unmarshal(r, &tok) == nil:
			t.vars[name] = tok.Content
		}
	}
	return t, nil
}

// Render renders a conversation.
//
// The template sees messages as dictionaries in the OpenAI shape: role and
// content always; reasoning_content, tool_calls, tool_call_id and name when
// set. A tool call is {"id" (when set), "type": "function", "function":
// {"name", "arguments"}} with the arguments decoded into a dictionary, as
// templates expect (and vLLM and transformers provide); they must be a
// JSON object. tools is the list of tool objects, or none when empty.
// add_generation_prompt is addGenerationPrompt. extra adds or overrides
// variables, for example enable_thinking or bos_token; maps in it are
// iterated in sorted key order.
func (t *Template) Render(msgs []Message, tools []Tool, addGenerationPrompt bool, extra map[string]any) (string, error) {
	data := make(map[string]jinja.Value, len(t.vars)+len(extra)+3)
	for k, v := range t.vars {
		data[k] = jinja.FromGoValue(v)
	}
	list := make([]jinja.Value, len(msgs))
	for i := range msgs {
		v, err := messageValue(&msgs[i])
		if err != nil {
			return "", fmt.Errorf("chat: message %d (%s): %w", i, msgs[i].Role, err)
		}
		list[i] = v
	}
	data["messages"] = jinja.NewList(list)
	data["tools"] = jinja.None()
	if len(tools) > 0 {
		tl := make([]jinja.Value, len(tools))
		for i := range tools {
			obj, err := tools[i].object()
			if err != nil {
				return "", fmt.Errorf("chat: tool %d: %w", i, err)
			}
			tl[i] = jinjaValue(obj)
		}
		data["tools"] = jinja.NewList(tl)
	}
	data["add_generation_prompt"] = jinja.NewBool(addGenerationPrompt)
	for k, v := range extra {
		data[k] = jinja.FromGoValue(v)
	}
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chat: rendering the chat template: %w", err)
	}
	return out, nil
}

// messageValue converts m to the dictionary a template sees.
func messageValue(m *Message) (jinja.Value, error) {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(m.Content))
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i := range m.ToolCalls {
			c := &m.ToolCalls[i]
			args, err := c.arguments()
			if err != nil {
				return jinja.Value{}, err
			}
			fn := jinja.NewDict()
			fn.AsDict().Set("name", jinja.NewString(c.Name))
			fn.AsDict().Set("arguments", jinjaValue(args))
			call := jinja.NewDict()
			if c.ID != "" {
				call.AsDict().Set("id", jinja.NewString(c.ID))
			}
			call.AsDict().Set("type", jinja.NewString("function"))
			call.AsDict().Set("function", fn)
			calls[i] = call
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	return v, nil
}

// jinjaValue converts a decoded JSON value to a template value, keeping key
// order.
func jinjaValue(v jsonValue) jinja.Value {
	switch v.kind {
	case jsonBool:
		return jinja.NewBool(v.b)
	case jsonNumber:
		if !strings.ContainsAny(v.s, ".eE") {
			if n, err := strconv.ParseInt(v.s, 10, 64); err == nil {
				return jinja.NewInt(n)
			}
		}
		f, _ := strconv.ParseFloat(v.s, 64)
		return jinja.NewFloat(f)
	case jsonString:
		return jinja.NewString(v.s)
	case jsonArray:
		items := make([]jinja.Value, len(v.items))
		for i, it := range v.items {
			items[i] = jinjaValue(it)
		}
		return jinja.NewList(items)
	case jsonObject:
		d := jinja.NewDict()
		for _, m := range v.members {
			d.AsDict().Set(m.key, jinjaValue(m.val))
		}
		return d
	}
	return jinja.None()
}
