// Package chat turns conversations into prompt text and model output back
// into replies.
//
// DeepSeek-V4 has its own encoding, implemented natively: EncodeDeepSeekV4
// renders messages (system, developer, user, assistant, tool and
// latest_reminder roles; chat and thinking modes; tools and tool calls in
// the DSML format) byte for byte as DeepSeek's reference encoder
// encoding_dsv4.py does, and ParseDeepSeekV4 and StreamParser read a
// completion back into reasoning, content and tool calls.
//
// Models that ship a Jinja chat_template in tokenizer_config.json (or a
// chat_template.jinja beside it) use it through Template and LoadTemplate.
// Qwen3.5 is one: its template renders thinking (<think>) and tool calls in
// Qwen3-Coder's XML form; ParseQwen35 and Qwen35StreamParser read its
// completions back into reasoning, content and OpenAI-style tool calls
// (also accepting Qwen3's <tool_call>{json}</tool_call> form).
//
// JSON that prompts embed (tool schemas, tool-call arguments) is written as
// Python's json.dumps writes it with ensure_ascii=False: separators ", " and
// ": ", object keys in their original order, non-ASCII characters as they
// are, and floats as Python's repr prints them.
package chat
