// Package server is strata's OpenAI-compatible HTTP API in front of an
// engine.Engine.
//
// # Endpoints
//
//	POST /v1/chat/completions   chat, streaming (SSE) or not
//	POST /v1/completions        legacy text completion, streaming or not
//	GET  /v1/models             the one served model; GET /v1/models/{name}
//	GET  /health                {"status":"ok"}
//	GET  /metrics               Prometheus text format
//
// Streams are server-sent events, "data: <JSON>\n\n" each, ending with
// "data: [DONE]\n\n"; with stream_options.include_usage the last event
// before [DONE] has no choices and the usage.
//
// # Requests
//
// Both generation endpoints take model (required; it must be the served
// name), stream, stream_options.include_usage, temperature (0 to 2,
// default 1), top_p (in (0, 1]), presence_penalty and frequency_penalty
// (-2 to 2), n (choices; each is its own engine request, choice i seeded
// seed+i), seed (any integer; 0 is a seed like any other), stop (a string
// or up to 16 strings), and these extensions: top_k, min_p,
// repetition_penalty, ignore_eos, and skip_special_tokens (default true:
// special tokens such as EOS produce no text), and response_format
// (below; on /v1/completions an extension, as in vLLM). Unknown fields are
// ignored; logit_bias is refused.
//
// /v1/chat/completions also takes messages (roles system, developer, user,
// assistant, tool; content a string, null or an array of text parts),
// max_completion_tokens or max_tokens (default: the rest of the context,
// capped by Options.DefaultMaxTokens), logprobs and top_logprobs (0 to
// 20), tools (functions), tool_choice ("auto", "none", which leaves the
// tools out of the prompt, "required": one or more calls, or {"type":
// "function", "function": {"name": ...}}: one call of that function),
// parallel_tool_calls (false: at most one call), response_format, and
// thinking mode, asked for in any of three ways, which must agree:
//
//	"reasoning_effort": "low"|"medium"|"high" (thinking), "xhigh"|"max"
//	    (thinking with DeepSeek-V4's maximum-effort prefix), "none" (off)
//	"thinking": {"type": "enabled"|"disabled"}
//	"chat_template_kwargs": {"thinking": bool} or {"enable_thinking": bool}
//
// Other chat_template_kwargs reach Jinja templates as variables.
//
// Structured output is enforced while decoding (structured.go, package
// grammar): response_format {"type": "json_object"} makes the reply a JSON
// object, {"type": "json_schema", "json_schema": {"name", "schema"}} a
// document valid under the schema (strict or not; a keyword the compiler
// does not support is a 400 naming it), and a forced tool_choice a DSML
// tool-call block (DeepSeek-V4's format; other chat formats refuse it)
// whose arguments validate against the tool's parameters. JSON is compact.
// In thinking mode the reasoning up to </think> is free. With tools and
// tool_choice "auto", a json response_format allows either the document
// or tool calls.
//
// /v1/completions also takes prompt (a string, strings, token ids, or
// arrays of token ids; n choices per prompt, choice p*n+i answering prompt
// p), max_tokens (default 16), logprobs (0 to 20 alternatives, legacy
// format), echo (not with logprobs) and best_of (only equal to n). Text
// prompts get BOS first when the tokenizer's add_bos_token says so.
//
// # Generation
//
// A chat is rendered by the ChatFormat (DeepSeekV4 or Jinja) and
// tokenized with special tokens recognised. Each choice's tokens are
// decoded incrementally; stop strings are looked for in that text, which
// is held back while it could be the start of one, and a choice that
// reaches one ends there (finish_reason "stop") and its engine request is
// cancelled at once. The text then goes through the format's ReplyParser:
// reasoning (thinking mode) streams as delta.reasoning_content, the answer
// as delta.content, and DSML tool calls are sent whole at the end as
// delta.tool_calls with ids "call_<random>", and finish_reason
// "tool_calls". The engine's stop token (EOS) ends a choice with "stop"
// and is counted but never shown; max_tokens ends it with "length".
//
// usage.prompt_tokens counts each prompt once; usage.completion_tokens
// counts every token generated, EOS included, over all choices. Log
// probabilities cover the same tokens, one entry each (so in thinking mode
// they include the reasoning's), with the token's text, its bytes, and the
// alternatives from the model's raw distribution; in a stream they ride
// with the chunk whose text their tokens completed.
//
// # Errors and limits
//
// Errors are OpenAI's JSON error object {"error": {"message", "type",
// "param", "code"}}: 400 for malformed JSON, wrong types or invalid values
// (param names the field), and for a prompt that, with max_tokens, does not
// fit the context (code "context_length_exceeded"); 404 for an unknown
// model (code "model_not_found") or URL; 405 for a wrong method; 413 for a
// body over Options.MaxBodyBytes; 503 with Retry-After when the engine's
// queue is full (code "queue_full"). The context is the smaller of
// Options.MaxContext and what the whole cache pool holds.
//
// A request is cancelled when its client goes away: the request's context
// (from net/http) is the engine requests' context, and the engine frees
// their cache pages at its next step. Serve runs the handler on a listener
// and shuts it down gracefully.
//
// # Metrics
//
// The metrics live on a registry of the Server's own: strata_requests_total
// {endpoint, status}, strata_request_duration_seconds {endpoint},
// strata_prompt_tokens_total and strata_generation_tokens_total (as the
// responses' usage counts them), strata_time_to_first_token_seconds and
// strata_inter_token_latency_seconds (per choice), and, read from
// engine.Stats at scrape time, strata_queue_depth, strata_running_requests,
// strata_cache_pages_used {kind}, strata_cache_pages_total,
// strata_cache_pages_free and engine counters (steps, preemptions,
// cancellations); plus the Go and process collectors.
package server
