package colbert

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenPlaidRefusesForgedHeaders: plaid.bin files whose header counts are huge (with a
// manifest whose size and sha256 match, as a careless copy or a hostile writer makes) are
// refused with an error naming the file, never a panic: counts near 2^61 once overflowed the
// int64 size check and reached make.
func TestOpenPlaidRefusesForgedHeaders(t *testing.T) {
	for i, hdr := range [][5]int64{
		{8, 1, 1 << 61, 0, 0},             // centroids: c*d*4 wraps to 0, c*4 to -2^63
		{8, 1, 1, 1 << 62, 0},             // passages: n*4 wraps to 0
		{8, 1, 1, 0, 1 << 62},             // tokens: tok*5 wraps
		{8, 2, 1, 0, 3074457345618258603}, // tokens*6 wraps to a small number
	} {
		dir := t.TempDir()
		b := binary.LittleEndian.AppendUint64(nil, uint64(hdr[0]))
		for _, v := range hdr[1:] {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
		b = append(b, make([]byte, 64)...)
		os.WriteFile(filepath.Join(dir, PlaidFile), b, 0o644)
		s := sha256.Sum256(b)
		m, _ := json.Marshal(PlaidManifest{Format: PlaidFormat, File: PlaidFile, Dim: int(hdr[0]), NBits: int(hdr[1]),
			Centroids: int(hdr[2]), Passages: int(hdr[3]), Tokens: int(hdr[4]), Bytes: int64(len(b)), SHA256: hex.EncodeToString(s[:])})
		os.WriteFile(filepath.Join(dir, ManifestFile), m, 0o644)
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("header %d %v: panic %v", i, hdr, r)
				}
			}()
			_, _, err := OpenPlaid(dir)
			if err == nil || !strings.Contains(err.Error(), PlaidFile) {
				t.Errorf("header %d %v: err = %v, want one naming %s", i, hdr, err, PlaidFile)
			}
		}()
	}
}
