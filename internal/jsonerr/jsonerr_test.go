package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestOffset(t *testing.T) {
	var v struct{ A int }
	syn := json.Unmarshal([]byte("{\n\"A\": }"), &v)
	typ := json.Unmarshal([]byte("{\n\"A\": \"x\"}"), &v)
	for _, c := range []struct {
		err  error
		off  int64
		want bool
	}{
		{syn, 8, true},
		{fmt.Errorf("file: %w", syn), 8, true},
		{typ, 10, true},
		{errors.New("other"), 0, false},
	} {
		if off, ok := Offset(c.err); off != c.off || ok != c.want {
			t.Errorf("Offset(%v) = %d, %v, want %d, %v", c.err, off, ok, c.off, c.want)
		}
	}
}
