package indexrefresh

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/model"
	"gorgonia.org/tensor"
)

func f32Param(name string, shape []int, vals ...float32) *model.Param {
	return &model.Param{Name: name, Value: tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))}
}

func f64Param(name string, shape []int, vals ...float64) *model.Param {
	return &model.Param{Name: name, Value: tensor.New(tensor.WithShape(shape...), tensor.WithBacking(vals))}
}

// TestHashParamsGolden checks the documented byte layout against a hash computed
// independently (Python hashlib over the same bytes):
// sha256(u64(1) "a" u64(7) "float32" u64(1) u64(2) f32(1) f32(-2)
//
//	u64(1) "b" u64(7) "float64" u64(2) u64(1) u64(1) f64(0.5))[:16].
func TestHashParamsGolden(t *testing.T) {
	const golden = "ca620c69e2b4c79b"
	a := f32Param("a", []int{2}, 1, -2)
	b := f64Param("b", []int{1, 1}, 0.5)
	for _, order := range [][]*model.Param{{a, b}, {b, a}} {
		got, err := HashParams(order)
		if err != nil {
			t.Fatal(err)
		}
		if got != golden {
			t.Errorf("HashParams(%s, %s) = %s, want %s", order[0].Name, order[1].Name, got, golden)
		}
	}
	// Each part of the layout changes the hash.
	variants := map[string][]*model.Param{
		"value one ulp up": {f32Param("a", []int{2}, 1, math.Nextafter32(-2, 0)), b},
		"shape [2,1]":      {f32Param("a", []int{2, 1}, 1, -2), b},
		"renamed":          {f32Param("c", []int{2}, 1, -2), b},
		"dtype float64":    {f64Param("a", []int{2}, 1, -2), b},
		"one param fewer":  {a},
	}
	for name, ps := range variants {
		got, err := HashParams(ps)
		if err != nil {
			t.Fatal(err)
		}
		if got == golden || len(got) != 16 {
			t.Errorf("%s: hash %s, want 16 hex digits other than %s", name, got, golden)
		}
	}
}

func TestTakeSnapshotIsolation(t *testing.T) {
	w := f32Param("doc.w", []int{2, 2}, 1, 2, 3, 4)
	b := f64Param("doc.b", []int{2}, 0.25, -0.5)
	params := []*model.Param{w, b}
	before, _ := HashParams(params)

	snap, err := TakeSnapshot(params, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Version(); got != (Version{Step: 7, ParamHash: before}) {
		t.Fatalf("Version = %+v, want step 7 hash %s", got, before)
	}

	// Training goes on: the originals change in place.
	wd := w.Value.Data().([]float32)
	for i := range wd {
		wd[i] *= -10
	}
	b.Value.Data().([]float64)[1] = 99

	if got := snap.Param("doc.w").Value.Data().([]float32); !slices.Equal(got, []float32{1, 2, 3, 4}) {
		t.Errorf("snapshot doc.w = %v after mutating the original, want [1 2 3 4]", got)
	}
	if got := snap.Param("doc.b").Value.Data().([]float64); !slices.Equal(got, []float64{0.25, -0.5}) {
		t.Errorf("snapshot doc.b = %v after mutating the original, want [0.25 -0.5]", got)
	}
	if h, _ := HashParams(snap.Params()); h != before {
		t.Errorf("hash of snapshot params = %s, want %s (unchanged)", h, before)
	}
	if after, _ := HashParams(params); after == before {
		t.Errorf("hash of mutated originals = %s, equal to the snapshot's", after)
	}
	if snap.Param("doc.w") == w || snap.Param("doc.w").Value == w.Value {
		t.Error("snapshot shares the original parameter")
	}
	if names := []string{snap.Params()[0].Name, snap.Params()[1].Name}; !slices.Equal(names, []string{"doc.b", "doc.w"}) {
		t.Errorf("Params names = %v, want sorted [doc.b doc.w]", names)
	}

	// CopyTo restores the snapshot's values into a worker's tower.
	dst := []*model.Param{f32Param("doc.w", []int{2, 2}, 0, 0, 0, 0)}
	if err := snap.CopyTo(dst); err != nil {
		t.Fatal(err)
	}
	if got := dst[0].Value.Data().([]float32); !slices.Equal(got, []float32{1, 2, 3, 4}) {
		t.Errorf("CopyTo wrote %v, want [1 2 3 4]", got)
	}
	dst[0].Value.Data().([]float32)[0] = 42
	if got := snap.Param("doc.w").Value.Data().([]float32)[0]; got != 1 {
		t.Errorf("writing into CopyTo's destination changed the snapshot to %v", got)
	}
}

func TestTakeSnapshotErrors(t *testing.T) {
	ok := f32Param("ok", []int{1}, 1)
	tests := []struct {
		name   string
		params []*model.Param
		want   string
	}{
		{"nil param", []*model.Param{ok, nil}, "parameter 1 is nil"},
		{"nil value", []*model.Param{{Name: "x"}}, "parameter 0 is nil"},
		{"empty name", []*model.Param{f32Param("", []int{1}, 1)}, "parameter 0 has an empty name"},
		{"repeated", []*model.Param{ok, f32Param("ok", []int{1}, 2)}, `name "ok" is repeated`},
		{"int dtype", []*model.Param{{Name: "ids", Value: tensor.New(tensor.WithShape(2), tensor.WithBacking([]int{1, 2}))}},
			`"ids" has dtype int`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := TakeSnapshot(tc.params, 1); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("TakeSnapshot error = %v, want it to contain %q", err, tc.want)
			}
			if _, err := HashParams(tc.params); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("HashParams error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestCopyToErrors(t *testing.T) {
	snap, err := TakeSnapshot([]*model.Param{
		f32Param("a", []int{2}, 1, 2),
		f32Param("b", []int{2}, 3, 4),
	}, 3)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dst  *model.Param
		want string
	}{
		{"missing", f32Param("c", []int{2}, 0, 0), `"c" is not in the snapshot of step 3`},
		{"shape", f32Param("b", []int{1, 2}, 0, 0), `"b" is float32 (1, 2) in dst, float32 (2) in the snapshot`},
		{"dtype", f64Param("b", []int{2}, 0, 0), `"b" is float64 (2) in dst, float32 (2) in the snapshot`},
		{"nil", nil, "nil parameter"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			first := f32Param("a", []int{2}, -1, -1)
			err := snap.CopyTo([]*model.Param{first, tc.dst})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CopyTo error = %v, want it to contain %q", err, tc.want)
			}
			if got := first.Value.Data().([]float32); !slices.Equal(got, []float32{-1, -1}) {
				t.Errorf("CopyTo failed but wrote %v into the first parameter", got)
			}
		})
	}
}
