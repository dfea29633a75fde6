// Package jsonerr reads where in its input a JSON decoding error (encoding/json) happened, so
// that a reader can name the line of a file it failed on.
package jsonerr

import (
	"encoding/json"
	"errors"
)

// Offset returns the byte offset in the input that a syntax or type error (json.SyntaxError,
// json.UnmarshalTypeError, wrapped or not) carries, and false for any other error.
func Offset(err error) (int64, bool) {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return syn.Offset, true
	case errors.As(err, &typ):
		return typ.Offset, true
	}
	return 0, false
}
