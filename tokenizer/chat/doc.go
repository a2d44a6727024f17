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
// Models that ship a Jinja chat_template in tokenizer_config.json use it
// through Template.
//
// JSON that prompts embed (tool schemas, tool-call arguments) is written as
// Python's json.dumps writes it with ensure_ascii=False: separators ", " and
// ": ", object keys in their original order, non-ASCII characters as they
// are, and floats as Python's repr prints them.
package chat
