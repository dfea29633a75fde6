package configs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRealmSections loads the [realm] and [index_refresh] keys and rejects impossible
// values with the file, line and key.
func TestRealmSections(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) (*Recipe, error) {
		path := filepath.Join(dir, "r.toml")
		if err := os.WriteFile(path, []byte("kind = \"realm\"\n[tokenizer]\ntrain = true\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}
	r, err := load("[realm]\nsystems = [\"async\", \"sync\"]\nsteps = 7\n[index_refresh]\nrefresh_every = 3\nswap_after = 2\n")
	if err != nil {
		t.Fatal(err)
	}
	if r.Realm.Steps != 7 || r.IndexRefresh.RefreshEvery != 3 || r.IndexRefresh.SwapAfter != 2 || r.Realm.TopK != 4 {
		t.Errorf("loaded %+v %+v", r.Realm, r.IndexRefresh)
	}
	// realm.seeds: unset or empty is one run at seed; a list starting with seed is kept as written.
	for body, want := range map[string][]int64{"": nil, "[realm]\nseeds = []\n": {}, "[realm]\nseeds = [42, 7, 1234]\n": {42, 7, 1234}} {
		r, err := load(body)
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if !slices.Equal(r.Realm.Seeds, want) || (want == nil) != (r.Realm.Seeds == nil) {
			t.Errorf("%q: realm.seeds = %#v, want %#v", body, r.Realm.Seeds, want)
		}
	}
	// [replug] is kind replug's own section: experiment/replug tests it.
	for _, c := range []struct{ body, want string }{
		{"[realm]\nsystems = [\"async\", \"stale\"]\n", `r.toml:5: realm.systems: unknown value "stale"`},
		{"[realm]\nsystems = []\n", `r.toml:5: realm.systems: must name at least one`},
		{"[index_refresh]\nmode = \"lazy\"\n", `r.toml:5: index_refresh.mode: unknown value "lazy"`},
		{"[index_refresh]\nrefresh_every = 4\nswap_after = 4\n", `r.toml:6: index_refresh.swap_after: index_refresh.swap_after = 4 must be below index_refresh.refresh_every = 4`},
		{"[realm]\nsystems = [\"frozen\"]\n[model]\nshared_towers = true\n", `r.toml:5: realm.systems: realm.systems "frozen" freezes the passage tower`},
		{"[data]\ndir = \"x\"\n", `r.toml:4: section [data] is not read by kind "realm"`},
		{"[realm]\nseeds = [42, 7, 42]\n", `r.toml:5: realm.seeds: seed 42 listed twice`},
		{"[realm]\nseeds = [42, \"7\"]\n", `r.toml:5: realm.seeds:`},
		{"[realm]\nseeds = [42, 7.5]\n", `r.toml:5: realm.seeds:`},
		{"[realm]\nseeds = [42, -1]\n", `r.toml:5: realm.seeds: must be >= 0, got -1`},
		{"[realm]\nseeds = [7, 42]\n", `r.toml:5: realm.seeds: the first of realm.seeds is 7, want the top-level seed = 42`},
	} {
		_, err := load(c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.body, err, c.want)
		}
	}
}
