package export

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/internal/jsonerr"
	"github.com/ragtrain/ragtrain/tokenize"
)

// RecipeFile is the resolved recipe a run directory holds (experiment.ResolvedRecipeFile; the
// name is repeated here because experiment imports this package for init_from).
const RecipeFile = "recipe.resolved.toml"

// ManifestFile is the file at the root of every export that names its kind, layout and source.
const ManifestFile = "ragtrain.json"

// Options control Export.
type Options struct {
	// Embeddings also encodes the run's corpus with the passage tower into embeddings/
	// (bi-encoders only; needs the run's recipe and data).
	Embeddings bool
	// Log receives one line per written directory; nil discards them.
	Log io.Writer
	// TruncateDim, when > 0, exports a bi-encoder trained with Matryoshka prefixes
	// (loss.dims) truncated to its first TruncateDim coordinates: truncate_dim in
	// config_sentence_transformers.json and ragtrain.json, and corpus embeddings of that width
	// (re-normalised for cosine). 0 exports the full vectors. Bi-encoders only; at most the
	// model's dimension.
	TruncateDim int
	// Adapter exports a LoRA fine-tune's adapters alone as a peft adapter directory instead of
	// the merged model (kind reader_lm only).
	Adapter bool
}

// Run is a trained model as a run directory holds it: its latest checkpoint and its recipe.
type Run struct {
	// Dir is the run directory, or the checkpoint directory when one was opened directly.
	Dir string
	// Checkpoint is the checkpoint read (the one the run's "latest" file names).
	Checkpoint *checkpoints.Checkpoint
	// Kind is config.json's "kind": "bi-encoder" (retriever runs), later "cross-encoder" and
	// "reader".
	Kind string
	// Recipe is the run's recipe.resolved.toml, nil when it could not be read (RecipeErr says
	// why); only the corpus embeddings need it. Reading it needs the recipe kinds registered
	// (configs.RegisterKind): a program using export imports package experiment, which does.
	Recipe    *configs.Recipe
	RecipeErr error
}

// OpenRun reads the latest checkpoint of a run directory, or a checkpoint directory itself
// (run/checkpoint-train-300), and the run's recipe.resolved.toml (in the directory given or the
// one above it).
func OpenRun(path string) (*Run, error) {
	r := &Run{Dir: path}
	var err error
	recipeDir := path
	_, latestErr := os.Stat(filepath.Join(path, checkpoints.LatestFile))
	_, stateErr := os.Stat(filepath.Join(path, checkpoints.TrainerFile))
	if latestErr == nil {
		r.Checkpoint, err = checkpoints.LoadLatest(path) // an export never falls back to an older checkpoint
	} else if stateErr == nil {
		r.Checkpoint, err = checkpoints.LoadDir(path)
		recipeDir = filepath.Dir(path)
	} else if e := cmp.Or(notMissing(latestErr), notMissing(stateErr)); e != nil {
		return nil, fmt.Errorf("%s: cannot read the directory: %w", path, e) // e.g. permission denied, not "no latest"
	} else {
		var models []string
		if sub, _ := filepath.Glob(filepath.Join(path, "*", checkpoints.LatestFile)); len(sub) > 0 {
			for _, s := range sub {
				models = append(models, filepath.Dir(s))
			}
			return nil, fmt.Errorf("%s holds several models; name one of: %s", path, strings.Join(models, ", "))
		}
		return nil, fmt.Errorf("%s: neither a run directory (no %s) nor a checkpoint directory (no %s)",
			path, checkpoints.LatestFile, checkpoints.TrainerFile)
	}
	if err != nil {
		return nil, err
	}
	if !exists(filepath.Join(recipeDir, RecipeFile)) {
		recipeDir = filepath.Dir(recipeDir) // a model directory inside a run (e.g. run/reranker-listwise)
	}
	var head struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(r.Checkpoint.Config.(json.RawMessage), &head); err != nil || head.Kind == "" {
		return nil, fmt.Errorf("%s: no \"kind\" naming the model (bi-encoder, ...)", filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile))
	}
	r.Kind = head.Kind
	recipe := filepath.Join(recipeDir, RecipeFile)
	if r.Recipe, r.RecipeErr = configs.Load(recipe); r.RecipeErr != nil {
		r.Recipe = nil
	}
	return r, nil
}

// notMissing is err unless it says the file does not exist.
func notMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Tokenizer loads the checkpoint's tokenizer.json.
func (r *Run) Tokenizer() (*tokenize.Tokenizer, error) {
	path := filepath.Join(r.Checkpoint.Dir, checkpoints.TokenizerFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: the checkpoint has no tokenizer: %w", r.Checkpoint.Dir, err)
	}
	return tokenize.Load(path)
}

// Source names the checkpoint an export was made from.
type Source struct {
	Run        string `json:"run"`        // the directory given to Export
	Checkpoint string `json:"checkpoint"` // the checkpoint directory read
	Phase      string `json:"phase"`      // its training phase, e.g. "train"
	Step       int    `json:"step"`       // completed steps of that phase
}

func (r *Run) source() Source {
	st := r.Checkpoint.Trainer
	return Source{Run: absPath(r.Dir), Checkpoint: absPath(r.Checkpoint.Dir), Phase: st.Phase, Step: st.Step}
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// An exporter writes the model of r into dir, which exists and is empty.
type exporter func(r *Run, dir string, o Options) error

// exporters by config.json "kind". Each model kind registers its exporter from its own file
// (biencoder.go, later crossencoder.go and reader.go).
var exporters = map[string]exporter{}

func register(kind string, f exporter) {
	if _, dup := exporters[kind]; dup {
		panic("export: kind " + kind + " registered twice")
	}
	exporters[kind] = f
}

// Kinds returns the model kinds Export knows, sorted.
func Kinds() []string {
	var ks []string
	for k := range exporters {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// Export writes the model of a run directory (its latest checkpoint) or of a checkpoint
// directory into the new directory out, in the serving layout of its kind (see the package
// documentation). out must not exist or be empty; everything is written into a temporary
// sibling directory that is renamed to out at the end, so out is either complete or absent.
func Export(run, out string, o Options) error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	r, err := OpenRun(run)
	if err != nil {
		return err
	}
	if o.TruncateDim != 0 && r.Kind != KindBiEncoder {
		return fmt.Errorf("%s: truncate_dim %d: only a bi-encoder's embeddings can be truncated, this is a %s", r.Dir, o.TruncateDim, r.Kind)
	}
	if o.Adapter && r.Kind != KindReaderLM {
		return fmt.Errorf("%s: adapter: only a reader_lm LoRA run's adapters can be exported alone, this is a %s", r.Dir, r.Kind)
	}
	f, ok := exporters[r.Kind]
	if !ok {
		return fmt.Errorf("%s: model kind %q cannot be exported yet (known: %s)",
			filepath.Join(r.Checkpoint.Dir, checkpoints.ConfigFile), r.Kind, strings.Join(Kinds(), ", "))
	}
	return writeDir(out, func(tmp string) error { return f(r, tmp, o) })
}

// writeDir creates the directory out through a temporary sibling filled by fill.
func writeDir(out string, fill func(tmp string) error) error {
	out = filepath.Clean(out)
	if entries, err := os.ReadDir(out); err == nil {
		if len(entries) > 0 {
			return fmt.Errorf("%s: exists and is not empty; export into a new directory", out)
		}
		if err := os.Remove(out); err != nil {
			return err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(out)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	if err := removeStale(out); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, tmpPrefix(out)+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return err
	}
	if err := fill(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return atomicfile.SyncDir(parent)
}

// readJSON decodes the JSON file at path into v; unknown fields are an error when strict.
func readJSON(path string, v any, strict bool) error {
	b, err := bounded.ReadFile(path, bounded.ConfigJSON)
	if err != nil {
		return err
	}
	d := json.NewDecoder(strings.NewReader(string(b)))
	if strict {
		d.DisallowUnknownFields()
	}
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s:%d: %w", path, jsonErrLine(b, err), err)
	}
	return nil
}

// jsonErrLine returns the 1-based line of a JSON decoding error, 1 when unknown.
func jsonErrLine(b []byte, err error) int {
	off, ok := jsonerr.Offset(err)
	if !ok {
		return 1
	}
	return 1 + strings.Count(string(b[:min(int(off), len(b))]), "\n")
}
