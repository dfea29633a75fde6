package checkpoints

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/trainer"
)

// File names inside one checkpoint directory, and the pointer file in the run directory.
const (
	ModelFile     = "model.safetensors"
	ConfigFile    = "config.json"
	TokenizerFile = "tokenizer.json"
	OptimizerFile = "optimizer.safetensors"
	StateFile     = "state.safetensors"
	TrainerFile   = "trainer_state.json"
	LatestFile    = "latest"

	tmpPrefix = "checkpoint.tmp-"
	dirPrefix = "checkpoint-"
)

// Checkpoint is everything needed to use a trained model or to resume its training.
type Checkpoint struct {
	// Params are the model parameters (float32, with shapes), saved in model.safetensors under
	// their names. Required.
	Params []Tensor
	// Config is the architecture, any JSON-serialisable value, saved as config.json. After Load
	// it is a json.RawMessage; use DecodeConfig to read it into a struct. Required.
	Config any
	// Tokenizer holds the bytes of tokenizer.json; alternatively TokenizerPath names a file to
	// copy. Both empty: no tokenizer.json. After Load, Tokenizer holds the bytes (nil if none).
	Tokenizer     []byte
	TokenizerPath string
	// Optimizer is the AdamW state, saved in optimizer.safetensors; nil for none.
	Optimizer *OptimizerState
	// Trainer is the loop's position, saved as trainer_state.json.
	Trainer TrainerState
	// State holds a task's own tensors beyond the parameters and the optimizer (e.g. a cache it
	// fills as it trains, which a resumed task must find as the interrupted one left it), any
	// dtype, saved in state.safetensors; nil for none (after Load: no such file).
	State []RawTensor
	// Dir is the checkpoint directory it was loaded from (set by Load and LoadDir), e.g.
	// run/checkpoint-train-500; tokenize.Load(filepath.Join(Dir, TokenizerFile)) reads the
	// tokenizer.
	Dir string
}

// OptimizerState is the trainer's AdamW state (Loshchilov & Hutter 2019), one type for the
// optimizer and its checkpoint: the number of updates taken (t in the bias corrections 1-β^t)
// and the first and second moments per parameter name, each as long as that parameter's data.
// In optimizer.safetensors the moments of parameter p are the F32 tensors "m.p" and "v.p" with
// p's shape, and Step is the metadata entry "step".
type OptimizerState = trainer.OptimizerState

// TrainerState is the training loop's position, saved as trainer_state.json; with the step
// counter the sampler and every seeded draw replay from where they stopped.
type TrainerState struct {
	Step            int     `json:"step"`             // completed optimizer steps in Phase
	Phase           string  `json:"phase"`            // e.g. "pretrain" or "train"; letters, digits, '_' (part of the directory name)
	Epoch           int     `json:"epoch"`            // sampler epoch reached
	SamplerPosition int     `json:"sampler_position"` // sampler position (examples consumed), for the record
	Seed            uint64  `json:"seed"`             // the recipe seed
	BestMetric      float64 `json:"best_metric"`      // best validation value so far (0 if none)
	BestMetricName  string  `json:"best_metric_name,omitempty"`
	TrainSeconds    float64 `json:"train_seconds"` // wall-clock training time so far, over every resumed segment
	// RNG holds serialised generator states by name (e.g. rand.PCG.MarshalBinary), base64 in JSON.
	RNG map[string][]byte `json:"rng,omitempty"`
	// LogBytes is the length of the run's log.jsonl when the checkpoint was saved
	// (trainer.Log.Size); a resumed run reopens the log there (trainer.OpenLogAt) so the steps it
	// replays are not logged twice. 0: not recorded (older checkpoints); the log is appended to.
	LogBytes int64 `json:"log_bytes,omitempty"`
	// Counters are a task's counts accumulated over the steps so far (e.g. the contexts a rag
	// phase cut to fit), by name, restored with the steps on resume.
	Counters map[string]int `json:"counters,omitempty"`
}

// DecodeConfig decodes the architecture config into v (a pointer), whether Config came from Load
// (raw JSON) or was set by the caller.
func (ck *Checkpoint) DecodeConfig(v any) error {
	raw, ok := ck.Config.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(ck.Config); err != nil {
			return fmt.Errorf("checkpoint config: %w", err)
		}
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(ck.Dir, ConfigFile), err)
	}
	return nil
}

var phaseRE = regexp.MustCompile(`^[A-Za-z0-9_]*$`)

// Save writes ck as a new checkpoint directory under the run directory dir and makes it the
// latest, so that a crash at any point leaves Load returning either the previous complete
// checkpoint or the new one, never a mix:
//
//  1. every file is written into dir/checkpoint.tmp-XXXX/ (each through a temporary file,
//     fsync and rename), and that directory is fsynced;
//  2. it is renamed to dir/checkpoint-<phase>-<step>/ (checkpoint-<step> when Phase is empty;
//     a ".2", ".3", ... suffix if that name is taken), and dir is fsynced;
//  3. dir/latest, one line naming that directory, is replaced atomically (temp, fsync, rename).
//
// Load follows dir/latest only, so a directory renamed in step 2 before a crash in step 3 is
// complete but ignored. Afterwards Save keeps the new checkpoint and the one latest named before
// it, and removes older checkpoint-* directories and checkpoint.tmp-* leftovers of crashed saves.
// One process at a time may save into dir.
func Save(dir string, ck *Checkpoint) error {
	if ck == nil {
		return errors.New("checkpoints.Save: nil checkpoint")
	}
	if !phaseRE.MatchString(ck.Trainer.Phase) {
		return fmt.Errorf("checkpoints.Save: phase %q: only letters, digits and '_' are allowed", ck.Trainer.Phase)
	}
	if ck.Trainer.Step < 0 {
		return fmt.Errorf("checkpoints.Save: negative step %d", ck.Trainer.Step)
	}
	if ck.Config == nil {
		return errors.New("checkpoints.Save: no config")
	}
	if len(ck.Tokenizer) > 0 && ck.TokenizerPath != "" {
		return errors.New("checkpoints.Save: both Tokenizer bytes and TokenizerPath are set")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	if err := writeFiles(tmp, ck); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}

	name := dirPrefix + strconv.Itoa(ck.Trainer.Step)
	if ck.Trainer.Phase != "" {
		name = dirPrefix + ck.Trainer.Phase + "-" + strconv.Itoa(ck.Trainer.Step)
	}
	for i, base := 2, name; exists(filepath.Join(dir, name)); i++ {
		name = base + "." + strconv.Itoa(i)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return err
	}
	prev, _ := readLatest(dir)
	if err := atomicfile.Write(filepath.Join(dir, LatestFile), func(w io.Writer) error {
		_, err := io.WriteString(w, name+"\n")
		return err
	}); err != nil {
		return err
	}
	return prune(dir, name, prev)
}

// writeFiles writes the checkpoint's files into the directory tmp.
func writeFiles(tmp string, ck *Checkpoint) error {
	if err := WriteSafetensors(filepath.Join(tmp, ModelFile), ck.Params, nil); err != nil {
		return err
	}
	if err := atomicfile.WriteJSON(filepath.Join(tmp, ConfigFile), ck.Config); err != nil {
		return err
	}
	tok := ck.Tokenizer
	if ck.TokenizerPath != "" {
		var err error
		if tok, err = bounded.ReadFile(ck.TokenizerPath, bounded.Tokenizer); err != nil {
			return err
		}
	}
	if len(tok) > 0 {
		if !json.Valid(tok) {
			src := ck.TokenizerPath
			if src == "" {
				src = "Checkpoint.Tokenizer"
			}
			return fmt.Errorf("%s: tokenizer is not valid JSON", src)
		}
		if err := atomicfile.Write(filepath.Join(tmp, TokenizerFile), func(w io.Writer) error {
			_, err := w.Write(tok)
			return err
		}); err != nil {
			return err
		}
	}
	if ck.Optimizer != nil {
		if err := writeOptimizer(filepath.Join(tmp, OptimizerFile), ck.Optimizer, ck.Params); err != nil {
			return err
		}
	}
	if len(ck.State) > 0 {
		if err := WriteSafetensorsRaw(filepath.Join(tmp, StateFile), ck.State, nil); err != nil {
			return err
		}
	}
	if err := atomicfile.WriteJSON(filepath.Join(tmp, TrainerFile), ck.Trainer); err != nil {
		return err
	}
	if err := writeChecksums(tmp); err != nil {
		return err
	}
	return atomicfile.SyncDir(tmp)
}

func writeOptimizer(path string, o *OptimizerState, params []Tensor) error {
	if o.Step < 0 {
		return fmt.Errorf("%s: negative optimizer step %d", path, o.Step)
	}
	shapes := make(map[string][]int, len(params))
	for _, p := range params {
		shapes[p.Name] = p.Shape
	}
	var ts []Tensor
	for _, kind := range []struct {
		prefix  string
		m, pair map[string][]float32
	}{{"m.", o.M, o.V}, {"v.", o.V, o.M}} {
		for name, data := range kind.m {
			shape, ok := shapes[name]
			if !ok {
				return fmt.Errorf("%s: optimizer moment %q names no parameter", path, kind.prefix+name)
			}
			if _, ok := kind.pair[name]; !ok {
				return fmt.Errorf("%s: parameter %q has a first or second moment but not both", path, name)
			}
			ts = append(ts, Tensor{Name: kind.prefix + name, Shape: shape, Data: data})
		}
	}
	meta := map[string]string{"step": strconv.Itoa(o.Step)}
	if w := o.Window; w.Steps > 0 { // the loop's partial log window (trainer.OptimizerState.Window)
		meta["log_window_loss"] = strconv.FormatFloat(w.Loss, 'g', -1, 64)
		meta["log_window_steps"] = strconv.Itoa(w.Steps)
		meta["log_window_examples"] = strconv.Itoa(w.Examples)
	}
	return WriteSafetensors(path, ts, meta)
}

// Load loads the checkpoint that dir/latest names (see Save). A missing latest, a latest naming
// no directory, and any missing or malformed file are errors naming the file. When a file of
// that checkpoint fails its checksum (ErrCorrupt), Load falls back to the newest intact
// checkpoint directory of dir (Save keeps the one before the latest) and writes one line to
// Warnings naming the damaged file and the checkpoint used; with none intact the error names
// the damaged file. LoadLatest does not fall back.
func Load(dir string) (*Checkpoint, error) {
	name, err := readLatest(dir)
	if err != nil {
		return nil, err
	}
	ck, err := LoadDir(filepath.Join(dir, name))
	if err != nil && errors.Is(err, ErrCorrupt) {
		return fallback(dir, name, err)
	}
	return ck, err
}

// LoadLatest is Load without the fall-back: exactly the checkpoint dir/latest names, or the
// error naming its damaged file (for an export, which must not silently export an older
// checkpoint).
func LoadLatest(dir string) (*Checkpoint, error) {
	name, err := readLatest(dir)
	if err != nil {
		return nil, err
	}
	return LoadDir(filepath.Join(dir, name))
}

func readLatest(dir string) (string, error) {
	path := filepath.Join(dir, LatestFile)
	b, err := bounded.ReadFile(path, bounded.SmallFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: no complete checkpoint (%s is missing): %w", dir, LatestFile, err)
	}
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(b))
	if !strings.HasPrefix(name, dirPrefix) || strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") {
		return "", fmt.Errorf("%s:1: %q is not a checkpoint directory name", path, name)
	}
	return name, nil
}

// LoadDir loads one checkpoint directory (e.g. run/checkpoint-train-500). model.safetensors,
// config.json and trainer_state.json are required; tokenizer.json, optimizer.safetensors and
// state.safetensors are read when present.
//
// Every file the directory's ChecksumFile lists is checked first (VerifyDir): a damaged one is
// an error naming it, wrapping ErrCorrupt.
func LoadDir(path string) (*Checkpoint, error) {
	ck := &Checkpoint{Dir: path}
	if err := VerifyDir(path); err != nil {
		return nil, err
	}
	var err error
	if ck.Params, _, err = ReadSafetensors(filepath.Join(path, ModelFile)); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(path, ConfigFile)
	cfg, err := bounded.ReadFile(cfgPath, bounded.ConfigJSON)
	if err != nil {
		return nil, err
	}
	if !json.Valid(cfg) {
		return nil, fmt.Errorf("%s: invalid JSON", cfgPath)
	}
	ck.Config = json.RawMessage(bytes.TrimSpace(cfg))

	if ck.Tokenizer, err = bounded.ReadFile(filepath.Join(path, TokenizerFile), bounded.Tokenizer); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		ck.Tokenizer = nil
	}
	if ck.Optimizer, err = readOptimizer(filepath.Join(path, OptimizerFile), ck.Params); err != nil {
		return nil, err
	}
	if ck.State, _, err = ReadSafetensorsRaw(filepath.Join(path, StateFile)); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		ck.State = nil
	}

	tsPath := filepath.Join(path, TrainerFile)
	b, err := bounded.ReadFile(tsPath, bounded.ConfigJSON)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&ck.Trainer); err != nil {
		return nil, fmt.Errorf("%s: %w", tsPath, err)
	}
	return ck, nil
}

// readOptimizer reads optimizer.safetensors; a missing file gives a nil state.
func readOptimizer(path string, params []Tensor) (*OptimizerState, error) {
	ts, meta, err := ReadSafetensors(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	step, err := strconv.Atoi(meta["step"])
	if err != nil || step < 0 {
		return nil, fmt.Errorf("%s: metadata \"step\" = %q, want a count >= 0", path, meta["step"])
	}
	size := make(map[string]int, len(params))
	for _, p := range params {
		size[p.Name] = len(p.Data)
	}
	o := &OptimizerState{Step: step, M: map[string][]float32{}, V: map[string][]float32{}}
	if meta["log_window_steps"] != "" {
		w := &o.Window
		var errs [3]error
		w.Loss, errs[0] = strconv.ParseFloat(meta["log_window_loss"], 64)
		w.Steps, errs[1] = strconv.Atoi(meta["log_window_steps"])
		w.Examples, errs[2] = strconv.Atoi(meta["log_window_examples"])
		if errors.Join(errs[:]...) != nil || w.Steps < 0 || w.Examples < 0 || math.IsNaN(w.Loss) || math.IsInf(w.Loss, 0) {
			return nil, fmt.Errorf("%s: metadata log_window_loss/steps/examples = %q/%q/%q, want a finite sum and counts >= 0", path, meta["log_window_loss"], meta["log_window_steps"], meta["log_window_examples"])
		}
	}
	for _, t := range ts {
		kind, name, _ := strings.Cut(t.Name, ".")
		var dst map[string][]float32
		switch kind {
		case "m":
			dst = o.M
		case "v":
			dst = o.V
		default:
			return nil, fmt.Errorf("%s: tensor %q: want m.<param> or v.<param>", path, t.Name)
		}
		n, ok := size[name]
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q: no parameter %q in %s", path, t.Name, name, ModelFile)
		}
		if n != len(t.Data) {
			return nil, fmt.Errorf("%s: tensor %q has %d values, parameter %q has %d", path, t.Name, len(t.Data), name, n)
		}
		dst[name] = t.Data
	}
	for name := range o.M {
		if _, ok := o.V[name]; !ok {
			return nil, fmt.Errorf("%s: parameter %q has m.%s but no v.%s", path, name, name, name)
		}
	}
	for name := range o.V {
		if _, ok := o.M[name]; !ok {
			return nil, fmt.Errorf("%s: parameter %q has v.%s but no m.%s", path, name, name, name)
		}
	}
	return o, nil
}

// prune removes checkpoint directories other than keep and prev, and leftovers of crashed saves
// (checkpoint.tmp-* directories, .latest.tmp-* files).
func prune(dir, keep, prev string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		n := e.Name()
		if !e.IsDir() && strings.HasPrefix(n, "."+LatestFile+".tmp-") {
			if err := os.Remove(filepath.Join(dir, n)); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if !e.IsDir() || n == keep || n == prev || !strings.HasPrefix(n, dirPrefix) && !strings.HasPrefix(n, tmpPrefix) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Checkpoints lists the complete checkpoint directories under dir (names, sorted), for reports.
func Checkpoints(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), dirPrefix) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
