// Package server is strata's HTTP API in front of an engine.Engine: the
// OpenAI chat completions, completions and Responses APIs, Anthropic's
// Messages API, and vLLM's tokenize endpoints, over one engine and one
// chat format.
//
// # Endpoints
//
//	POST   /v1/chat/completions       OpenAI chat, streaming (SSE) or not
//	POST   /v1/completions            OpenAI legacy text completion, streaming or not
//	POST   /v1/responses              OpenAI Responses API, streaming or not
//	GET    /v1/responses/{id}         a stored response
//	DELETE /v1/responses/{id}         forget a stored response
//	POST   /v1/messages               Anthropic Messages API, streaming or not
//	POST   /v1/messages/count_tokens  Anthropic: the prompt's token count
//	POST   /tokenize, /detokenize     vLLM's: token ids of a prompt or a chat, and back
//	GET    /v1/models                 the one served model; GET /v1/models/{name}
//	GET    /health                    {"status":"ok"} (a prefill worker: 503 while its decode worker is unreachable)
//	GET    /metrics                   Prometheus text format
//
// Every request body is one JSON object in UTF-8 (a byte order mark is
// skipped). A field the server does not know is a 400
// ("unsupported_parameter"), as is a value it cannot honour: the server
// never ignores what it was asked. Structured output, forced tool calls
// and strict tools are enforced while decoding on every chat API (below).
//
// # Shared generation fields
//
// /v1/chat/completions and /v1/completions take model (required; the
// served name), stream, stream_options.include_usage, temperature (0 to 2,
// default 1), top_p (in (0, 1]), presence_penalty and frequency_penalty
// (-2 to 2), n (choices; each is its own engine request, choice i seeded
// seed+i), seed (any integer), stop (a string or up to 16 strings),
// logit_bias (token id to -100..100, added to the logits), user (logged),
// and these extensions: top_k, min_p, repetition_penalty, ignore_eos,
// skip_special_tokens (default true), stop_token_ids (up to 64 ids that end
// a choice, finish_reason "stop"), include_stop_str_in_output (keep the
// stop string or stop token's text), min_tokens (EOS and stop tokens are
// held back until then), and response_format (below; on /v1/completions
// an extension, as in vLLM).
//
// /v1/chat/completions also takes messages (roles system, developer, user,
// assistant, tool; content a string, null or an array of text parts; the
// refusal, annotations, audio and function_call fields the SDKs send back
// are accepted when empty), max_completion_tokens or max_tokens (default:
// the rest of the context, capped by Options.DefaultMaxTokens), logprobs
// and top_logprobs (0 to 20), tools (functions; function.strict true:
// calls follow the parameter schema), tool_choice ("auto",
// "none", which leaves the tools out of the prompt, "required": one or
// more calls, or {"type": "function", "function": {"name": ...}}: one
// call of that function), parallel_tool_calls (false: at most one call),
// response_format (text, json_object, json_schema: enforced while
// decoding), store (false only), service_tier (auto or default),
// modalities (["text"]), prompt_cache_key (nothing to do: the prefix cache
// finds shared prefixes itself), safety_identifier (logged), and thinking
// mode, asked for in any of three ways, which must agree:
//
//	"reasoning_effort": "minimal"|"low"|"medium"|"high" (thinking),
//	    "xhigh"|"max" (with DeepSeek-V4's maximum-effort prefix), "none" (off)
//	"thinking": {"type": "enabled"|"disabled"}
//	"chat_template_kwargs": {"thinking": bool} or {"enable_thinking": bool}
//
// Other chat_template_kwargs reach Jinja templates as variables.
//
// Structured output is enforced while decoding (structured.go, package
// grammar): response_format {"type": "json_object"} makes the reply a JSON
// object, {"type": "json_schema", "json_schema": {"name", "schema"}} a
// document valid under the schema (strict or not; a keyword the compiler
// does not support is a 400 naming it), and a forced tool_choice tool
// calls in the chat format's markup whose arguments validate against the
// tool's parameters (DeepSeek-V4's and DeepSeek-V3.2's DSML, GLM's and
// Qwen3.5's <tool_call> elements; a format without a tool grammar, Gemma 4
// or a plain Jinja template, refuses it with a 400 naming the format).
// JSON is compact. In thinking mode the reasoning up to </think> is free.
// With tools and tool_choice "auto", a json response_format allows either
// the document or tool calls; strict tools make the reply free content,
// then possibly calls whose arguments follow the schema for the strict
// tools and are free for the others. The Responses API's text.format and
// Anthropic's output_config.format and tool_choice are the same
// constraints in those APIs' spellings (constraint.go).
//
// /v1/completions also takes prompt (a string, strings, token ids, or
// arrays of token ids; n choices per prompt, choice p*n+i answering prompt
// p), max_tokens (default 16), logprobs (0 to 20 alternatives, legacy
// format), echo (not with logprobs) and best_of (only equal to n). Text
// prompts get BOS first when the tokenizer's add_bos_token says so.
//
// # Responses API
//
// POST /v1/responses takes model, input (a string or items: messages with
// roles user, assistant, system, developer and text parts input_text,
// output_text or refusal; function_call; function_call_output; reasoning,
// whose text is its reasoning_text content, else its encrypted_content,
// else its summary), instructions (a system message first; not inherited
// through previous_response_id), max_output_tokens (status "incomplete"
// when reached), temperature, top_p, tools (function tools, strict unless
// strict is false, as OpenAI's default is), tool_choice ("auto", "none",
// "required" or {"type": "function", "name"}; echoed), parallel_tool_calls,
// max_tool_calls, reasoning {effort (none: chat mode; minimal to high:
// thinking; xhigh: maximum effort), summary (auto, concise, detailed:
// strata has no summarizer, so the summary is the reasoning itself)},
// include (["reasoning.encrypted_content"]: the reasoning, base64-encoded,
// not encrypted), store (default true), previous_response_id, text.format
// (text; json_object; json_schema with name, schema, description and
// strict: enforced as response_format is; echoed), text.verbosity medium,
// truncation disabled, metadata (returned), user and safety_identifier
// (logged), prompt_cache_key, service_tier (auto or default), stream, and
// the extensions seed, top_k and ignore_eos.
//
// The reply's reasoning is a reasoning item, its text a message item, its
// tool calls function_call items (call ids "call_<random>"). A stream sends
// response.created, response.in_progress, then per item
// response.output_item.added, content parts and their deltas
// (response.reasoning_text.delta, or response.reasoning_summary_text.delta
// when a summary was asked for; response.output_text.delta;
// response.function_call_arguments.delta), their done events and
// response.output_item.done, and last response.completed or
// response.incomplete (or, on failure, an error event and
// response.failed), every event with its sequence_number.
//
// A response made with store true is kept in memory (at most
// Options.MaxStoredResponses, oldest first out) with its conversation and
// its token ids exactly as the engine ran them. A request with its
// previous_response_id renders the whole conversation, reasoning kept, and
// when that text starts with the stored tokens' text, its prompt is the
// stored tokens followed by the tokens of the rest: the engine's prefix
// cache holds the state of every aligned block of them, so the
// continuation's prompt is not recomputed, and
// usage.input_tokens_details.cached_tokens says how much was reused.
//
// # Anthropic Messages API
//
// POST /v1/messages takes model, max_tokens (required), messages (roles
// user and assistant, the first the user's; content a string or blocks:
// text, tool_use and tool_result (is_error prefixes "Error: "), thinking
// (its signature carries the reasoning, so a block sent back with its text
// omitted still renders it); a last assistant message is continued, its
// text not repeated), system (a string or text blocks), stop_sequences
// (stop_reason "stop_sequence" with the sequence), stream, temperature (0
// to 1), top_p, top_k, tools (client tools: name, description,
// input_schema, strict), tool_choice (auto, none, any: one or more calls,
// or tool with a name: one call of it; disable_parallel_tool_use: one call,
// the first when the model writes more), thinking ({"type": "enabled",
// "budget_tokens": 1024 or more and less than max_tokens: a target, as
// Anthropic documents it, not a cut}, "adaptive" or "disabled"; display
// "summarized" or "omitted"), output_config.effort (xhigh and max:
// DeepSeek-V4's maximum effort), output_config.format ({"type":
// "json_schema", "schema"}: the text block is a document valid under the
// schema; not with a prefilled last assistant message), metadata.user_id
// (logged), service_tier, and cache_control on the request and its blocks
// (nothing to do: the prefix cache is automatic). count_tokens takes the
// same conversation fields.
//
// A reply is a thinking block (thinking mode), a text block and tool_use
// blocks (ids "toolu_<random>"); stop_reason is end_turn, max_tokens,
// stop_sequence or tool_use. usage.input_tokens counts the prompt tokens
// computed and cache_read_input_tokens those the prefix cache supplied.
// A stream sends message_start, ping, then content_block_start, _delta
// (text_delta, thinking_delta, signature_delta, input_json_delta) and
// _stop per block, message_delta with the stop reason and the usage, and
// message_stop; errors are Anthropic's {"type":"error","error":{"type",
// "message"}}, as an error event in a stream.
//
// # Generation
//
// A chat is rendered by the ChatFormat (DeepSeekV4, DeepSeekV32, GLM,
// Qwen35, Gemma4 or Jinja) and
// tokenized with special tokens recognised. Each choice's tokens are
// decoded incrementally; stop strings are looked for in that text, which
// is held back while it could be the start of one, and a choice that
// reaches one ends there (finish_reason "stop") and its engine request is
// cancelled at once. The text then goes through the format's ReplyParser:
// reasoning (thinking mode) streams as delta.reasoning_content, the answer
// as delta.content, and DSML tool calls are sent whole at the end as
// delta.tool_calls with ids "call_<random>", and finish_reason
// "tool_calls"; no part of the markup is ever streamed as text, and a tool
// call the model begins without closing </think> is still a tool call. The
// engine's stop token (EOS) ends a choice with "stop" and is counted but
// never shown; max_tokens ends it with "length". A reply that only
// reasoned has content null, and message.refusal is always null.
//
// usage.prompt_tokens counts each prompt once and
// prompt_tokens_details.cached_tokens the tokens of it the engine's prefix
// cache supplied (for the first choice of each prompt);
// usage.completion_tokens counts every token generated, EOS included, over
// all choices, and in thinking mode completion_tokens_details
// .reasoning_tokens those whose text was reasoning. With
// stream_options.include_usage every chunk has "usage": null but the last,
// which has no choices and the usage. Log probabilities cover the same
// tokens, one entry each, with the token's text, its bytes, and the
// alternatives from the model's raw distribution; in a stream they ride
// with the chunk whose text their tokens completed.
//
// An event stream that is quiet for Options.KeepAlive (a long prefill)
// gets a keep-alive: an SSE comment (": keep-alive"), or Anthropic's ping
// event.
//
// # Errors and limits
//
// OpenAI endpoints answer errors as OpenAI's JSON error object {"error":
// {"message", "type", "param", "code"}}: 400 for malformed JSON, invalid
// UTF-8, unknown fields, wrong types or invalid values (param names the
// field), and for a prompt that, with max_tokens, does not fit the context
// (code "context_length_exceeded"); 401 without the API key (code
// "invalid_api_key"); 404 for an unknown model (code "model_not_found"),
// URL or stored response; 405 for a wrong method; 413 for a body over
// Options.MaxBodyBytes; 503 with Retry-After when the engine's queue is
// full (code "queue_full") or the server is shutting down (code
// "shutting_down"). The context is the smaller of Options.MaxContext and
// what the whole cache pool holds.
//
// With Options.APIKey set, every request but those to
// Options.PublicPaths needs the key, as "Authorization: Bearer <key>" or
// "x-api-key: <key>".
//
// A request is cancelled when its client goes away: the request's context
// (from net/http) is the engine requests' context, and the engine frees
// their cache pages at its next step. Serve runs the handler on a listener
// and shuts it down gracefully; when the drain timeout expires it calls
// Abort, which ends every generation in flight with an error the client
// can read (a stream: a chunk with finish_reason "abort" per unfinished
// choice, then an error event; Anthropic's and the Responses API's
// streams: their error events; otherwise a 503), before it closes the
// connections.
//
// # Metrics
//
// The metrics live on a registry of the Server's own: strata_requests_total
// {endpoint, status}, strata_request_duration_seconds {endpoint},
// strata_prompt_tokens_total, strata_prompt_cached_tokens_total and
// strata_generation_tokens_total (as the responses' usage counts them),
// strata_time_to_first_token_seconds and
// strata_inter_token_latency_seconds (per choice), and, read from
// engine.Stats at scrape time, strata_queue_depth, strata_running_requests,
// strata_cache_pages_used {kind}, strata_cache_pages_total,
// strata_cache_pages_free and engine counters (steps, preemptions,
// cancellations, prefix-cache hits); plus the Go and process collectors.
package server
