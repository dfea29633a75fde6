// Command ggtok is the Go side of the GGUF tokenizer parity check
// (tools/interop/gguf_tokenizer.py): it loads the tokenizer of a GGUF file
// (tokenize.LoadGGUFTokenizer) and writes the ids of every text:
//
//	go run ./tools/interop/ggtok -gguf FILE -texts texts.jsonl -out ids.jsonl [-hf DIR]
//
// texts.jsonl holds one JSON value per line: a string to encode, or an array
// of ids to decode. ids.jsonl gets one JSON object per line, in the same
// order: {"ids": [...], "decoded": ..., "decoded_skip": ...}, where ids are
// Encode's (no BOS/EOS added) or the given ones, and the two texts are
// Decode(ids, false) and Decode(ids, true). With -hf it also writes the
// tokenizer as a Hugging Face directory (WriteHF) into DIR.
package main

import (
	"encoding/json"
	"flag"
	"fmt"

	"github.com/ragtrain/ragtrain/gguf"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/tokenize"
	"github.com/ragtrain/ragtrain/tools/internal/cli"
	"github.com/ragtrain/ragtrain/tools/interop/internal/jsonl"
)

func main() {
	path := flag.String("gguf", "", "GGUF file")
	texts := flag.String("texts", "", "JSONL file, one JSON string per line")
	out := flag.String("out", "", "output JSONL file of id arrays")
	hf := flag.String("hf", "", "also write the tokenizer as a Hugging Face directory here")
	flag.Parse()
	cli.Check("ggtok", run(*path, *texts, *out, *hf))
}

func run(path, textsPath, out, hf string) error {
	if path == "" || textsPath == "" || out == "" {
		return fmt.Errorf("-gguf, -texts and -out are required")
	}
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	tok, err := tokenize.LoadGGUFTokenizer(f)
	if err != nil {
		return err
	}
	if hf != "" {
		if err := tok.WriteHF(hf); err != nil {
			return err
		}
	}
	type result struct {
		IDs         []int  `json:"ids"`
		Decoded     string `json:"decoded"`
		DecodedSkip string `json:"decoded_skip"`
	}
	var buf []byte
	err = jsonl.Lines(textsPath, func(n int, line []byte) error {
		var s string
		ids := []int{}
		if err := json.Unmarshal(line, &s); err == nil {
			ids = append(ids, tok.Encode(s)...)
		} else if err := json.Unmarshal(line, &ids); err != nil {
			return fmt.Errorf("%s:%d: want a JSON string or an array of ids: %v", textsPath, n, err)
		}
		b, err := json.Marshal(result{ids, tok.Decode(ids, false), tok.Decode(ids, true)})
		if err != nil {
			return fmt.Errorf("%s:%d: %w", textsPath, n, err)
		}
		buf = append(append(buf, b...), '\n')
		return nil
	})
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(out, buf)
}
