// Package tokstore keeps a tokenized corpus on disk, compactly, for an encoder to read
// passage by passage through a memory map: every passage's token ids (Tokenizer.Encode of
// its text, before [CLS]/[SEP] and truncation) as uint16 when the vocabulary has at most
// 65,536 entries, else uint32, with an offsets table and the passage ids. Tokenizing a corpus
// once and mapping the result replaces holding every passage's text (or its []int ids, 8
// bytes a token) in memory: the store costs 2 bytes a token on disk, and only the pages read
// are resident.
//
// A store is one file, little-endian:
//
//	header   64 bytes: magic "RTTOKS01", token width W (2 or 4), vocabulary size V,
//	         passages N, total tokens T, byte offsets of the sections, file size
//	tokens   T ids of W bytes, passage after passage
//	offsets  N+1 uint64: passage i's tokens are ids offsets[i]..offsets[i+1]-1
//	idsOff   N+1 uint64 into the id bytes, then the UTF-8 passage ids
//
// Create writes to a temporary file beside the destination and Close renames it into place,
// so a reader sees no partial store. Not for: text (keep corpus.jsonl), or updates (rewrite).
package tokstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/edsrzf/mmap-go"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
)

const (
	magic      = "RTTOKS01"
	headerSize = 64
)

// Writer appends passages to a new store. It holds the offsets and ids of the passages
// written (16 bytes a passage plus the ids) until Close; the tokens go to disk as they come.
type Writer struct {
	path, tmp string
	f         *os.File
	w         *bufio.Writer
	width     int
	vocab     int
	tokOff    []uint64 // offsets[i], in tokens
	ids       []string
	seen      map[string]int
	err       error
}

// Create starts a store at path for token ids in [0, vocabSize). It fails when vocabSize is
// not in [1, 2^32].
func Create(path string, vocabSize int) (*Writer, error) {
	if vocabSize < 1 || vocabSize > 1<<32 {
		return nil, fmt.Errorf("tokstore: create %s: vocabulary size %d out of range [1, 2^32]", path, vocabSize)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, fmt.Errorf("tokstore: create %s: %w", path, err)
	}
	w := &Writer{path: path, tmp: f.Name(), f: f, w: bufio.NewWriterSize(f, 1<<20), width: 4, vocab: vocabSize,
		tokOff: []uint64{0}, seen: make(map[string]int)}
	if vocabSize <= 1<<16 {
		w.width = 2
	}
	w.w.Write(make([]byte, headerSize)) // rewritten by Close
	return w, nil
}

// Add appends passage id with its token ids. It fails, writing nothing, when id is empty, not
// UTF-8 or already added, or a token is outside [0, vocabSize); the error names the passage
// and the position, and the Writer stays usable. After a write error it is not: Close then
// removes the temporary file and returns the error.
func (w *Writer) Add(id string, tokens []int) error {
	if w.err != nil {
		return w.err
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("tokstore: %s: passage %d (id %q): %s", w.path, len(w.ids), id, fmt.Sprintf(format, args...))
	}
	switch {
	case id == "":
		return fail("empty id")
	case !utf8.ValidString(id):
		return fail("id is not valid UTF-8")
	}
	if j, dup := w.seen[id]; dup {
		return fail("id already added as passage %d", j)
	}
	for i, t := range tokens {
		if t < 0 || t >= w.vocab {
			return fail("token %d is %d, outside the vocabulary [0, %d)", i, t, w.vocab)
		}
	}
	var b [4]byte
	for _, t := range tokens {
		if w.width == 2 {
			binary.LittleEndian.PutUint16(b[:], uint16(t))
		} else {
			binary.LittleEndian.PutUint32(b[:], uint32(t))
		}
		if _, err := w.w.Write(b[:w.width]); err != nil {
			w.err = fmt.Errorf("tokstore: %s: %w", w.path, err)
			return w.err
		}
	}
	w.seen[id] = len(w.ids)
	w.ids = append(w.ids, id)
	w.tokOff = append(w.tokOff, w.tokOff[len(w.tokOff)-1]+uint64(len(tokens)))
	return nil
}

// Len returns the number of passages added.
func (w *Writer) Len() int { return len(w.ids) }

// Abort removes the temporary file without creating the store.
func (w *Writer) Abort() {
	w.err = errors.New("tokstore: Writer aborted")
	w.f.Close()
	os.Remove(w.tmp)
}

// Close writes the offsets, the ids and the header, syncs the file and renames it to the
// store's path. After an error in Add or Close, it removes the temporary file instead and
// returns that error.
func (w *Writer) Close() (err error) {
	defer func() {
		if err != nil {
			w.f.Close()
			os.Remove(w.tmp)
		}
	}()
	if w.err != nil {
		return w.err
	}
	w.err = errors.New("tokstore: Writer closed")
	le := binary.LittleEndian
	n, total := uint64(len(w.ids)), w.tokOff[len(w.tokOff)-1]
	offsetsAt := headerSize + total*uint64(w.width)
	pad := (8 - offsetsAt%8) % 8 // offsets tables 8-byte aligned
	w.w.Write(make([]byte, pad))
	offsetsAt += pad
	var b8 [8]byte
	for _, o := range w.tokOff {
		le.PutUint64(b8[:], o)
		w.w.Write(b8[:])
	}
	idsAt := offsetsAt + 8*(n+1)
	var idBytes uint64
	le.PutUint64(b8[:], 0)
	w.w.Write(b8[:])
	for _, id := range w.ids {
		idBytes += uint64(len(id))
		le.PutUint64(b8[:], idBytes)
		w.w.Write(b8[:])
	}
	for _, id := range w.ids {
		w.w.WriteString(id)
	}
	size := idsAt + 8*(n+1) + idBytes
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("tokstore: %s: %w", w.path, err)
	}
	h := make([]byte, headerSize)
	copy(h, magic)
	le.PutUint32(h[8:], uint32(w.width))
	le.PutUint64(h[16:], uint64(w.vocab))
	le.PutUint64(h[24:], n)
	le.PutUint64(h[32:], total)
	le.PutUint64(h[40:], offsetsAt)
	le.PutUint64(h[48:], idsAt)
	le.PutUint64(h[56:], size)
	if _, err := w.f.WriteAt(h, 0); err != nil {
		return fmt.Errorf("tokstore: %s: %w", w.path, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("tokstore: %s: %w", w.path, err)
	}
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("tokstore: %s: %w", w.path, err)
	}
	if err := os.Chmod(w.tmp, 0o644); err != nil {
		return fmt.Errorf("tokstore: %s: %w", w.path, err)
	}
	if err := os.Rename(w.tmp, w.path); err != nil {
		return fmt.Errorf("tokstore: %s: %w", w.path, err)
	}
	return atomicfile.SyncDir(filepath.Dir(w.path))
}

// Store is an open, memory-mapped store. It is read-only and safe for concurrent use.
type Store struct {
	path      string
	f         *os.File
	m         mmap.MMap
	width     int
	vocab     int
	n         int
	tokens    []byte
	offsets   []byte // N+1 uint64, in tokens
	idOffsets []byte // N+1 uint64, in bytes
	idBytes   []byte
}

// Open maps the store at path and checks its header, section offsets and size; a truncated
// or foreign file is an error naming it.
func Open(path string) (*Store, error) {
	f, err := bounded.OpenRegular(path)
	if err != nil {
		return nil, fmt.Errorf("tokstore: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tokstore: %w", err)
	}
	fail := func(format string, args ...any) (*Store, error) {
		f.Close()
		return nil, fmt.Errorf("tokstore: %s: %s", path, fmt.Sprintf(format, args...))
	}
	if st.Size() < headerSize {
		return fail("truncated: %d bytes, shorter than the %d-byte header", st.Size(), headerSize)
	}
	m, err := mmap.Map(f, mmap.RDONLY, 0)
	if err != nil {
		return fail("map: %v", err)
	}
	s := &Store{path: path, f: f, m: m}
	le := binary.LittleEndian
	bad := func(format string, args ...any) (*Store, error) {
		m.Unmap()
		return fail(format, args...)
	}
	if string(m[:8]) != magic {
		return bad("not a token store (bad magic)")
	}
	width, vocab := le.Uint32(m[8:]), le.Uint64(m[16:])
	n, total := le.Uint64(m[24:]), le.Uint64(m[32:])
	offsetsAt, idsAt, size := le.Uint64(m[40:]), le.Uint64(m[48:]), le.Uint64(m[56:])
	if size != uint64(len(m)) {
		if size > uint64(len(m)) {
			return bad("truncated: %d bytes, header says %d", len(m), size)
		}
		return bad("%d bytes, header says %d (trailing bytes)", len(m), size)
	}
	if (width != 2 && width != 4) || vocab < 1 || vocab > 1<<32 || n > size/8 || total > size/uint64(width) ||
		offsetsAt < headerSize+total*uint64(width) || offsetsAt%8 != 0 || idsAt != offsetsAt+8*(n+1) || idsAt+8*(n+1) > size {
		return bad("header: inconsistent (width %d, %d passages, %d tokens, sections at %d and %d, %d bytes)",
			width, n, total, offsetsAt, idsAt, size)
	}
	s.width, s.vocab, s.n = int(width), int(vocab), int(n)
	s.tokens = m[headerSize : headerSize+total*uint64(width)]
	s.offsets = m[offsetsAt:idsAt]
	s.idOffsets = m[idsAt : idsAt+8*(n+1)]
	s.idBytes = m[idsAt+8*(n+1):]
	// Offsets must rise from 0 to the totals: checked once here, so reads need no checks.
	for _, tab := range []struct {
		b    []byte
		last uint64
		what string
	}{{s.offsets, total, "token"}, {s.idOffsets, uint64(len(s.idBytes)), "id"}} {
		prev := uint64(0)
		if le.Uint64(tab.b) != 0 {
			return bad("%s offsets do not start at 0", tab.what)
		}
		for i := 1; i <= s.n; i++ {
			o := le.Uint64(tab.b[8*i:])
			if o < prev || o > tab.last || tab.what == "id" && o == prev {
				return bad("%s offset %d of passage %d out of order", tab.what, o, i-1)
			}
			prev = o
		}
		if prev != tab.last {
			return bad("%s offsets end at %d, want %d", tab.what, prev, tab.last)
		}
	}
	return s, nil
}

// Close unmaps and closes the store; Tokens and ID must not be called after.
func (s *Store) Close() error {
	err := s.m.Unmap()
	if cerr := s.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Len returns the number of passages N.
func (s *Store) Len() int { return s.n }

// VocabSize returns the vocabulary size V the store was written for.
func (s *Store) VocabSize() int { return s.vocab }

// TokenWidth returns the bytes a token takes, 2 or 4.
func (s *Store) TokenWidth() int { return s.width }

// NumTokens returns the number of tokens of passage i (0 <= i < N).
func (s *Store) NumTokens(i int) int {
	le := binary.LittleEndian
	return int(le.Uint64(s.offsets[8*(i+1):]) - le.Uint64(s.offsets[8*i:]))
}

// ID returns the id of passage i (a new string).
func (s *Store) ID(i int) string {
	le := binary.LittleEndian
	return string(s.idBytes[le.Uint64(s.idOffsets[8*i:]):le.Uint64(s.idOffsets[8*(i+1):])])
}

// Tokens appends the token ids of passage i (0 <= i < N) to dst and returns it: with a reused
// dst, reading passage after passage allocates nothing.
func (s *Store) Tokens(dst []int, i int) []int {
	le := binary.LittleEndian
	lo, hi := le.Uint64(s.offsets[8*i:]), le.Uint64(s.offsets[8*(i+1):])
	if s.width == 2 {
		b := s.tokens[2*lo : 2*hi]
		for k := 0; k < len(b); k += 2 {
			dst = append(dst, int(le.Uint16(b[k:])))
		}
		return dst
	}
	b := s.tokens[4*lo : 4*hi]
	for k := 0; k < len(b); k += 4 {
		dst = append(dst, int(le.Uint32(b[k:])))
	}
	return dst
}
