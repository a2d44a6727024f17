// Package grammar constrains generation to a formal language: JSON, JSON
// Schema, and grammars composed from literal text and schema-constrained
// values (a model's tool-call markup around arguments that follow the
// tool's schema). It compiles a language to a grammar over bytes and, for a
// tokenizer's vocabulary, gives the tokens allowed at each step of a
// generation.
//
// # Grammars
//
// An Expr is a set of byte strings built from Literal, Bytes, OneOf, Seq,
// Alt, Repeat, UTF8Char, TextUntil, Intersect and Minus (for regular
// parts), and Rules, which may refer to themselves. Compile turns an
// expression into a Grammar: one deterministic automaton per rule that is
// called (recursive rules, and rules too large to copy), every other rule
// copied into its users, run as a pushdown whose state is a set of
// configurations (node, return stack) so that ambiguity between rules
// costs nothing but a larger set. Compile prunes every transition after
// which the text could not be completed, so a generation that follows the
// grammar never reaches a dead end.
//
// # Token masks
//
// A Vocabulary arranges the tokens' byte strings in a trie. An Index binds
// a grammar to a vocabulary and computes, once per grammar node and on
// first use, the tokens that node allows whatever lies below it on the
// stack (one depth-first walk of the trie, pruned at the first dead byte)
// and the few tokens that finish the node's rule and go on reading, which
// a Matcher checks against its real stack. Matchers of one Index share that
// work; a Matcher also keeps the whole masks of its recent states when
// they were costly. Per token, a matcher costs a copy of a node's mask in
// the common case; see BenchmarkMatcher.
//
// # JSON Schema
//
// CompileSchema (and ParseSchema, for the parts of a schema) supports:
// type (one or an array; integer, number, string, boolean, null, array,
// object), properties, required, additionalProperties (false, true or a
// schema), enum, const, items, prefixItems (and items as an array with
// additionalItems, the older spelling), minItems, maxItems, minLength,
// maxLength (in code points, escapes and surrogate pairs counting one),
// pattern (Go's regexp/syntax reading of it, which covers the ECMA-262
// subset schemas use; anchors only at the ends, no word boundaries or
// lookaround),
// minimum, maximum, exclusiveMinimum, exclusiveMaximum (integers exactly;
// numbers exactly too, written without exponent when bounded), anyOf,
// allOf of one schema, and $ref to "#..." JSON pointers ($defs,
// definitions, any path; recursion included). Annotations (title,
// description, default, examples, $comment, deprecated, readOnly,
// writeOnly, $schema, $id, contentEncoding, contentMediaType, and format,
// an annotation in 2020-12) are ignored. Any other keyword, and $ref or
// anyOf beside other constraints, is a *SchemaError naming it (wrapping
// ErrUnsupported). A schema object with a duplicate key is refused.
//
// What is generated is always valid under the schema, but not every valid
// document can be generated:
//
//   - Insignificant whitespace: at most Options.Whitespace bytes at each
//     place JSON allows it; none by default (compact JSON).
//   - Object properties come in the order the schema declares them, each
//     at most once; additional properties (when allowed) come after them,
//     their names written without escapes. With additionalProperties
//     absent, other properties are generated only for an object schema
//     that declares none.
//   - Strings escape only what JSON requires to be escaped, plus any
//     escapes the model chooses; a lone surrogate escape is never valid.
//   - Numbers have at most 20 integer digits, 17 fraction digits and 3
//     exponent digits where nothing else bounds them; "-0" is not
//     generated for bounded integers.
//   - Strings longer than 1024 characters and arrays longer than 256 items
//     are not generated (a minLength or minItems above that is an error).
//   - enum and const values are written compactly, and only those that
//     satisfy the schema's other keywords are kept.
package grammar
