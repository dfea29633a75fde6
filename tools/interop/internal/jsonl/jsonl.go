// Package jsonl reads the text files the interoperability commands (tools/interop) share with
// their Python peers.
package jsonl

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
)

// Write creates (or truncates) path and writes n lines into it, line i the JSON encoding of
// value(i). A value that does not encode (a NaN) is an error naming the file and the line.
func Write(path string, n int, value func(i int) any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	for i := range n {
		b, err := json.Marshal(value(i))
		if err != nil {
			return fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		w.Write(append(b, '\n'))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// Strings reads a file of one JSON string per line (lines up to 64 MiB); a line that is not a
// JSON string is an error naming the file and the line.
func Strings(path string) ([]string, error) {
	var texts []string
	err := Lines(path, func(n int, line []byte) error {
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			return fmt.Errorf("%s:%d: want a JSON string: %w", path, n, err)
		}
		texts = append(texts, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return texts, nil
}

// Lines calls each with every line of the file at path (lines up to 64 MiB, without the
// newline; the bytes are valid until the next call) and its number, from 1, and returns the
// first error each returns. An error reading the file names it.
func Lines(path string, each func(n int, line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<26)
	for n := 1; sc.Scan(); n++ {
		if err := each(n, sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
