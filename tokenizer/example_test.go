package tokenizer_test

import (
	"fmt"
	"log"

	"github.com/strata-inference/strata/tokenizer"
)

func Example() {
	tok, err := tokenizer.LoadDir("testdata/tiny")
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode("hello world<|endoftext|>", true)
	fmt.Println(ids)
	fmt.Printf("%q\n", tok.Decode(ids, true))
	// Output:
	// [257 274 111 265 281]
	// "hello world"
}

// A Decoder returns text as soon as it is complete: the three bytes of 你
// arrive as three tokens here.
func ExampleDecoder() {
	tok, err := tokenizer.Load("testdata/tiny/tokenizer.json")
	if err != nil {
		log.Fatal(err)
	}
	d := tok.NewDecoder(false)
	for _, id := range []int32{'a', 0xE4, 0xBD, 0xA0, 'b'} {
		fmt.Printf("%q ", d.Add(id))
	}
	fmt.Printf("%q\n", d.Flush())
	// Output: "a" "" "" "你" "b" ""
}
