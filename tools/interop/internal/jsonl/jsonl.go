// Package jsonl reads the text files the interoperability commands (tools/interop) share with
// their Python peers.
package jsonl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// Strings reads a file of one JSON string per line (lines up to 64 MiB); a line that is not a
// JSON string is an error naming the file and the line.
func Strings(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	for n := 1; sc.Scan(); n++ {
		var s string
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("%s:%d: want a JSON string: %w", path, n, err)
		}
		texts = append(texts, s)
	}
	return texts, sc.Err()
}
