package configs

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// KindSpec says what a kind of recipe reads. Load rejects a recipe whose file
// sets a section its kind does not read, or names a loss it cannot train.
type KindSpec struct {
	// Sections are the top-level tables the kind reads: the shared ones,
	// "data", "tokenizer", "model", "loss", "sampler", "pretrain", "train",
	// "index", "eval", "world", "reader", "rag", "realm", "index_refresh",
	// and those a kind owns (Own: "rerank", "selfrag", "atlas", ...). The
	// top-level keys (kind, name, seed, output_dir) are read by every kind.
	Sections []string
	// Losses are the loss names the kind trains: the values loss.name may
	// take when the kind reads [loss] (a kind's own section checks its own
	// loss keys, as the reranker's rerank.losses).
	Losses []string
	// Own are the sections the kind owns, defined in its package (struct, defaults, validation);
	// RegisterKind adds them to the schema and their names to Sections.
	Own []Section
	// Keys are the keys of shared sections that only some kinds read (train.mini_batch_size,
	// index.stream_above, ...; see readsKey) which this kind reads; another kind's recipe that
	// sets one away from off is refused, naming the key.
	Keys []string
	// Check, when set, validates what the kind alone requires of the shared sections (run after
	// every section's own check), e.g. the retriever's train.warmup_steps within train.steps.
	Check func(c *Checker, r *Recipe)
}

var (
	kindsMu   sync.RWMutex
	kindSpecs = map[string]KindSpec{}
)

// RegisterKind makes a kind of recipe known to Load, with what it reads. Like
// database/sql.Register it is meant for init functions and panics when name is
// empty or registered twice, or when spec names a section the schema lacks.
func RegisterKind(name string, spec KindSpec) {
	if name == "" {
		panic("configs: RegisterKind with an empty name")
	}
	if _, dup := LookupKind(name); dup {
		panic(fmt.Sprintf("configs: RegisterKind called twice for kind %q", name))
	}
	registerSections(name, spec.Own)
	spec.Sections = slices.Clone(spec.Sections)
	for _, s := range spec.Own {
		if !slices.Contains(spec.Sections, s.Name) {
			spec.Sections = append(spec.Sections, s.Name)
		}
	}
	known := SectionNames()
	for _, s := range spec.Sections {
		if !slices.Contains(known, s) {
			panic(fmt.Sprintf("configs: RegisterKind(%q): unknown section %q (sections: %s)", name, s, strings.Join(known, ", ")))
		}
	}
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kindSpecs[name]; dup {
		panic(fmt.Sprintf("configs: RegisterKind called twice for kind %q", name))
	}
	kindSpecs[name] = KindSpec{Sections: spec.Sections, Losses: slices.Clone(spec.Losses), Own: slices.Clone(spec.Own), Keys: slices.Clone(spec.Keys), Check: spec.Check}
}

// Kinds returns the registered kinds, sorted.
func Kinds() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	return slices.Sorted(maps.Keys(kindSpecs))
}

// LookupKind returns the spec a kind was registered with.
func LookupKind(name string) (KindSpec, bool) {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	s, ok := kindSpecs[name]
	return s, ok
}

// SectionNames returns the top-level tables of the schema: the shared ones in declaration
// order ("data", "tokenizer", ..., "index_refresh"), then the kinds' own in registration order.
func SectionNames() []string {
	names := sharedSectionNames()
	for _, s := range ownSections() {
		names = append(names, s.Name)
	}
	return names
}

// sharedSectionNames returns the tables of Recipe, the sections configs defines.
func sharedSectionNames() []string {
	var names []string
	t := reflect.TypeOf(Recipe{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name := f.Tag.Get("toml"); name != "" && name != "-" && f.Type.Kind() == reflect.Struct {
			names = append(names, name)
		}
	}
	return names
}

// checkKind checks, right after decoding, that the kind is registered and that
// the file sets no section the kind does not read. legacy is true for a
// resolved recipe written before WriteResolved wrote only the kind's sections:
// its other sections are accepted when they hold nothing but defaults.
func (l *loader) checkKind(r *Recipe, legacy bool) error {
	spec, ok := LookupKind(r.Kind)
	if !ok {
		kinds := Kinds()
		if len(kinds) == 0 {
			return l.errf("kind", "unknown value %q: no kind is registered (a program reads recipes after importing github.com/ragtrain/ragtrain/experiment, which registers them)", r.Kind)
		}
		return l.errf("kind", "unknown value %q, want one of %s (the registered kinds)", r.Kind, quoteList(kinds))
	}
	bad, badLine := "", 0
	for _, s := range SectionNames() {
		if !l.isSet(s) || slices.Contains(spec.Sections, s) {
			continue
		}
		if legacy && reflect.DeepEqual(sectionValue(r, s), defaultSection(s)) {
			continue
		}
		if n := l.lineOf(s); bad == "" || (n > 0 && n < badLine) {
			bad, badLine = s, n
		}
	}
	if bad == "" {
		return nil
	}
	msg := fmt.Sprintf("section [%s] is not read by kind %q (it reads: %s)", bad, r.Kind, strings.Join(spec.Sections, ", "))
	if badLine > 0 {
		return fmt.Errorf("%s:%d: %s", l.path, badLine, msg)
	}
	return fmt.Errorf("%s: %s", l.path, msg)
}

// kindLoss fails key when the kind is registered and cannot train loss.
func (v *Checker) kindLoss(key, kind, loss string) {
	spec, ok := LookupKind(kind)
	if !ok || slices.Contains(spec.Losses, loss) {
		return
	}
	valid := make([]string, len(spec.Losses))
	for i, s := range spec.Losses {
		valid[i] = fmt.Sprintf("%q", s)
	}
	v.Fail(key, "kind %q cannot train %q (valid: %s)", kind, loss, strings.Join(valid, ", "))
}

// readsKey reports whether the recipe's kind reads key, one of the keys of shared sections that
// only the kinds listing it in KindSpec.Keys read; an unregistered kind reads every key.
func readsKey(kind, key string) bool {
	spec, ok := LookupKind(kind)
	return !ok || slices.Contains(spec.Keys, key)
}

// readsSection reports whether the recipe's kind reads section; an
// unregistered kind reads every section.
func readsSection(kind, section string) bool {
	spec, ok := LookupKind(kind)
	return !ok || slices.Contains(spec.Sections, section)
}
