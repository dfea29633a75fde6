package configs

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/BurntSushi/toml"
)

// Section is a table of the recipe that one kind owns (as [atlas] is kind atlas'): its struct,
// defaults and validation live in the kind's package, which lists it in KindSpec.Own; Load
// decodes the table through it, so its errors name the file, line and key as every error of
// Load does, and WriteResolved writes it back. A kind's run reads the decoded value with
// SectionOf.
type Section struct {
	// Name is the table's name, e.g. "atlas"; unique among all kinds' sections and not a shared
	// section's name.
	Name string
	// New returns a pointer to a fresh struct holding the section's defaults; its fields carry
	// toml tags, as the shared sections' do.
	New func() any
	// Check validates the decoded section (sec, New's type) within the whole recipe r, once every
	// shared section is valid, reporting the first impossible value with c.Fail; nil checks
	// nothing. Paths are resolved here (c.Abs), as Load resolves the shared sections' paths.
	Check func(c *Checker, r *Recipe, sec any)
}

// NewSection returns the Section of a kind's table name whose struct is T: defaults returns
// its defaults, check (nil for none) validates it within the recipe.
func NewSection[T any](name string, defaults func() T, check func(c *Checker, r *Recipe, sec *T)) Section {
	s := Section{Name: name, New: func() any { v := defaults(); return &v }}
	if check != nil {
		s.Check = func(c *Checker, r *Recipe, sec any) { check(c, r, sec.(*T)) }
	}
	return s
}

var (
	sectionsMu sync.RWMutex
	sections   []Section // every kind's own sections, in registration order
)

// registerSections records the sections a kind owns; it panics on a name already taken.
func registerSections(kind string, own []Section) {
	shared := sharedSectionNames()
	sectionsMu.Lock()
	defer sectionsMu.Unlock()
	for _, s := range own {
		if s.Name == "" || s.New == nil {
			panic(fmt.Sprintf("configs: RegisterKind(%q): a section needs a name and New", kind))
		}
		if slices.Contains(shared, s.Name) || slices.ContainsFunc(sections, func(o Section) bool { return o.Name == s.Name }) {
			panic(fmt.Sprintf("configs: RegisterKind(%q): section [%s] is already in the schema", kind, s.Name))
		}
		if reflect.TypeOf(s.New()).Kind() != reflect.Pointer {
			panic(fmt.Sprintf("configs: RegisterKind(%q): section [%s]: New must return a pointer to a struct", kind, s.Name))
		}
		sections = append(sections, s)
	}
}

// lookupSection returns a kind's own section by name.
func lookupSection(name string) (Section, bool) {
	sectionsMu.RLock()
	defer sectionsMu.RUnlock()
	for _, s := range sections {
		if s.Name == name {
			return s, true
		}
	}
	return Section{}, false
}

// ownSections returns every kind's own sections, in registration order.
func ownSections() []Section {
	sectionsMu.RLock()
	defer sectionsMu.RUnlock()
	return slices.Clone(sections)
}

// SectionOf returns the recipe's section name, as the kind that owns it registered it (T is
// the struct New returns a pointer to): the decoded table after Load, else (a recipe built in
// code, e.g. from Defaults) the section's defaults, stored in r so that changes to the result
// are the recipe's. It panics when no kind registered the section or T is not its type.
func SectionOf[T any](r *Recipe, name string) *T {
	if v, ok := r.sections[name]; ok {
		return v.(*T)
	}
	s, ok := lookupSection(name)
	if !ok {
		panic(fmt.Sprintf("configs: SectionOf: no kind registered section [%s]", name))
	}
	v := s.New().(*T)
	if r.sections == nil {
		r.sections = map[string]any{}
	}
	r.sections[name] = v
	return v
}

// sectionValue returns the value of a shared or own section of r (own: nil when r holds none).
func sectionValue(r *Recipe, section string) any {
	if _, ok := lookupSection(section); ok {
		return r.sections[section]
	}
	v := reflect.ValueOf(r).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("toml") == section {
			return v.Field(i).Interface()
		}
	}
	return nil
}

// defaultSection returns the defaults of a shared or own section.
func defaultSection(section string) any {
	if s, ok := lookupSection(section); ok {
		return s.New()
	}
	return sectionValue(Defaults(), section)
}

// DecodeSection decodes the section name of r into v, a pointer to a struct whose toml tags
// name the keys it reads (the section's other keys are ignored): how a package that the owning
// kind imports, and so cannot import it (export reads the selfrag decoding policy), reads a few
// keys of a kind's section by their recipe names. A kind's section r does not hold decodes as
// its defaults, and so does every section of a nil r. It fails when no shared or registered
// section has that name.
func DecodeSection(r *Recipe, name string, v any) error {
	var sec any
	if r != nil {
		sec = sectionValue(r, name)
	}
	if sec == nil {
		sec = defaultSection(name)
	}
	if sec == nil {
		return fmt.Errorf("recipe: no section [%s] (a kind's own section is known once its package is imported)", name)
	}
	text, err := toml.Marshal(sec)
	if err != nil {
		return fmt.Errorf("recipe: encode [%s]: %w", name, err)
	}
	if err := toml.Unmarshal(text, v); err != nil {
		return fmt.Errorf("recipe: decode [%s]: %w", name, err)
	}
	return nil
}
