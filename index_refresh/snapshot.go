package indexrefresh

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/ragtrain/ragtrain/model"
	"gorgonia.org/tensor"
)

// Version names one index: Step is the training step whose document-tower parameters encoded
// it, ParamHash the HashParams of those parameters.
type Version struct {
	Step      int
	ParamHash string
}

// String formats v as "step 120 (hash 3fa2c81e9b0d4e11)" for logs.
func (v Version) String() string { return fmt.Sprintf("step %d (hash %s)", v.Step, v.ParamHash) }

// Snapshot is an immutable deep copy of a tower's parameters taken at one training step.
// Training may go on mutating the original parameters; the snapshot does not change.
// A Snapshot is safe for concurrent use as long as nobody writes into Params' values.
type Snapshot struct {
	version Version
	params  []*model.Param // deep copies, sorted by name
	byName  map[string]*model.Param
}

// TakeSnapshot copies params (their values, not just the pointers) and labels the copy with
// step and HashParams(params). It fails on a nil parameter or value, an empty or repeated name,
// a view or scalar, or a dtype other than float32 and float64. It must not run concurrently
// with writes to params (call it from the training goroutine between optimiser steps).
func TakeSnapshot(params []*model.Param, step int) (Snapshot, error) {
	if err := checkParams(params); err != nil {
		return Snapshot{}, err
	}
	s := Snapshot{params: make([]*model.Param, len(params)), byName: make(map[string]*model.Param, len(params))}
	for i, p := range params {
		var backing any
		switch d := p.Value.Data().(type) {
		case []float32:
			backing = slices.Clone(d)
		case []float64:
			backing = slices.Clone(d)
		}
		shape := p.Value.Shape().Clone()
		c := &model.Param{Name: p.Name, Value: tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))}
		s.params[i] = c
		s.byName[c.Name] = c
	}
	sortByName(s.params)
	s.version = Version{Step: step, ParamHash: hashSorted(s.params)}
	return s, nil
}

// Version returns the step the snapshot was taken at and the hash of its parameters.
func (s Snapshot) Version() Version { return s.version }

// Params returns the snapshot's copies, sorted by name. They are shared by every caller: read
// them, or bind them into an inference graph, but never write into their values.
func (s Snapshot) Params() []*model.Param { return slices.Clone(s.params) }

// Param returns the snapshot's copy of the parameter called name, or nil.
func (s Snapshot) Param(name string) *model.Param { return s.byName[name] }

// CopyTo writes the snapshot's values into dst, matching parameters by name: typically the
// parameters of a worker's private tower, so that the worker encodes with the snapshot's
// weights. Every parameter of dst must be in the snapshot with the same shape and dtype (the
// snapshot may hold more). dst is left unchanged on error.
func (s Snapshot) CopyTo(dst []*model.Param) error {
	for _, d := range dst {
		if d == nil || d.Value == nil {
			return fmt.Errorf("index_refresh: CopyTo: nil parameter or value in dst")
		}
		src := s.byName[d.Name]
		if src == nil {
			return fmt.Errorf("index_refresh: CopyTo: parameter %q is not in the snapshot of %s", d.Name, s.version)
		}
		if !slices.Equal(src.Value.Shape(), d.Value.Shape()) || src.Value.Dtype() != d.Value.Dtype() {
			return fmt.Errorf("index_refresh: CopyTo: parameter %q is %v %v in dst, %v %v in the snapshot",
				d.Name, d.Value.Dtype(), d.Value.Shape(), src.Value.Dtype(), src.Value.Shape())
		}
		if d.Value.IsView() || d.Value.DataSize() != d.Value.Shape().TotalSize() {
			return fmt.Errorf("index_refresh: CopyTo: parameter %q in dst is a view", d.Name)
		}
	}
	for _, d := range dst {
		switch v := d.Value.Data().(type) {
		case []float32:
			copy(v, s.byName[d.Name].Value.Data().([]float32))
		case []float64:
			copy(v, s.byName[d.Name].Value.Data().([]float64))
		}
	}
	return nil
}

// HashParams returns the first 16 hex digits of the SHA-256 of params, which is independent
// of their order: for each parameter sorted by name, the hash reads the name's length (uint64)
// and bytes, the dtype's name's length and bytes ("float32" or "float64"), the number of
// dimensions and each dimension (uint64), then every value's IEEE 754 bits (4 or 8 bytes);
// all integers little-endian. Equal hashes mean, up to a 2^-64 chance, equal parameters.
// It fails as TakeSnapshot does.
func HashParams(params []*model.Param) (string, error) {
	if err := checkParams(params); err != nil {
		return "", err
	}
	sorted := slices.Clone(params)
	sortByName(sorted)
	return hashSorted(sorted), nil
}

// checkParams rejects what TakeSnapshot and HashParams cannot copy or hash.
func checkParams(params []*model.Param) error {
	seen := make(map[string]bool, len(params))
	for i, p := range params {
		if p == nil || p.Value == nil {
			return fmt.Errorf("index_refresh: parameter %d is nil or has no value", i)
		}
		if p.Name == "" {
			return fmt.Errorf("index_refresh: parameter %d has an empty name", i)
		}
		if seen[p.Name] {
			return fmt.Errorf("index_refresh: parameter name %q is repeated", p.Name)
		}
		seen[p.Name] = true
		if p.Value.IsView() || p.Value.DataSize() != p.Value.Shape().TotalSize() {
			return fmt.Errorf("index_refresh: parameter %q is a view or a scalar (%d values for shape %v)",
				p.Name, p.Value.DataSize(), p.Value.Shape())
		}
		switch p.Value.Data().(type) {
		case []float32, []float64:
		default:
			return fmt.Errorf("index_refresh: parameter %q has dtype %v (want float32 or float64)", p.Name, p.Value.Dtype())
		}
	}
	return nil
}

func sortByName(ps []*model.Param) {
	slices.SortFunc(ps, func(a, b *model.Param) int { return cmp.Compare(a.Name, b.Name) })
}

// hashSorted hashes checked parameters already sorted by name (see HashParams).
func hashSorted(ps []*model.Param) string {
	h := sha256.New()
	var buf [8]byte
	u64 := func(x uint64) {
		binary.LittleEndian.PutUint64(buf[:], x)
		h.Write(buf[:])
	}
	str := func(s string) {
		u64(uint64(len(s)))
		h.Write([]byte(s))
	}
	for _, p := range ps {
		str(p.Name)
		data := p.Value.Data() // []float32 or []float64 (checkParams)
		dtype := "float32"
		if _, ok := data.([]float64); ok {
			dtype = "float64"
		}
		str(dtype)
		shape := p.Value.Shape()
		u64(uint64(len(shape)))
		for _, n := range shape {
			u64(uint64(n))
		}
		binary.Write(h, binary.LittleEndian, data) // the IEEE 754 bits, little-endian; a hash never fails to write
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
