package fusion

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ragtrain/ragtrain/checkpoints"
	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/experiment"
	"github.com/ragtrain/ragtrain/experiment/internal/testkit"
	"github.com/ragtrain/ragtrain/experiment/ragkit"
)

// tinyFiDRecipe is a fid.only run over the rag tests' small garden world with tiny readers:
// it checks the machinery (training, evaluation, the swap, resume), not the accuracy.
func tinyFiDRecipe(t *testing.T, extra string) *configs.Recipe {
	return tinyFusionRecipe(t, "only = true\n"+extra)
}

// tinyFusionRecipe is tinyFiDRecipe without fid.only: extra goes into [fid].
func tinyFusionRecipe(t *testing.T, extra string) *configs.Recipe {
	t.Helper()
	text := strings.Replace(testkit.RecipeText(t, "rag-small", nil), `kind = "rag"`, `kind = "fusion"`, 1)
	text = strings.Replace(text, "hidden = 64\nlayers = 2", "hidden = 16\nlayers = 1", 1)
	text = strings.Replace(text, "dropout = 0.0", "dropout = 0.1", 1)
	text += "\n[knnlm]\nheld_out_docs = 40\nlambdas = [0.0, 0.5]\n[fid]\nks = [1, 3]\nsteps = 12\nbatch_size = 4\nlr = 3e-3\nencoder_length = 32\nreader_length = 96\ncheckpoint_every = 5\n" + extra
	rec, err := testkit.LoadText(t, filepath.Join(t.TempDir(), "fid-tiny.toml"), text)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// phaseStop interrupts a run in phase at step at.
type phaseStop struct {
	phase string
	at    int
}

// checkResumeExact runs rec whole, then once per stop interrupted there and resumed: the resumed
// run says it resumed, its metrics are the uninterrupted run's and so are the parameters of the
// checkpoints dirs (in the run directory, each at step steps), bit for bit. It returns the
// uninterrupted run's metrics and output.
func checkResumeExact(t *testing.T, rec *configs.Recipe, stops []phaseStop, dirs []string, steps int) (map[string]float64, string) {
	t.Helper()
	var out strings.Builder
	full, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	m, err := experiment.ReadMetrics(full)
	if err != nil {
		t.Fatal(err)
	}
	for _, stop := range stops {
		broken, err := experiment.Run(context.Background(), rec, experiment.Options{Progress: io.Discard, InterruptPhase: stop.phase, InterruptAt: stop.at})
		if err == nil || !strings.Contains(err.Error(), "interrupted") {
			t.Fatalf("%s: interrupted run: err = %v", stop.phase, err)
		}
		var out strings.Builder
		resumed, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard, ResumeDir: broken})
		if err != nil {
			t.Fatalf("%s: %v\n%s", stop.phase, err, out.String())
		}
		if !strings.Contains(out.String(), "resume: ") {
			t.Errorf("%s: the resumed run does not say it resumed:\n%s", stop.phase, out.String())
		}
		testkit.SameMetrics(t, stop.phase+": ", full, resumed, testkit.Untimed)
		for _, dir := range dirs {
			a, err := checkpoints.Load(filepath.Join(full, dir))
			if err != nil {
				t.Fatal(err)
			}
			b, err := checkpoints.Load(filepath.Join(resumed, dir))
			if err != nil {
				t.Fatal(err)
			}
			if a.Trainer.Step != steps || b.Trainer.Step != steps || len(a.Params) != len(b.Params) {
				t.Fatalf("%s %s: steps %d and %d, %d and %d tensors", stop.phase, dir, a.Trainer.Step, b.Trainer.Step, len(a.Params), len(b.Params))
			}
			for i := range a.Params {
				if !slices.Equal(a.Params[i].Data, b.Params[i].Data) {
					t.Errorf("%s: %s %s differs after resuming", stop.phase, dir, a.Params[i].Name)
				}
			}
		}
	}
	return m, out.String()
}

// TestFiDResumeExact interrupts each reader's training mid-phase (FiD at step 7, after its
// checkpoint at step 5; the in-context reader at step 3, before its first) and resumes: the
// trained parameters are the uninterrupted run's bit for bit, and so are the metrics.
func TestFiDResumeExact(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	m, out := checkResumeExact(t, tinyFiDRecipe(t, ""), []phaseStop{{"fid_fid", 7}, {"fid_rag", 3}}, []string{"fid/fid", "fid/rag"}, 12)
	for _, k := range []string{"fid@1/EM", "fid@3/EM", "rag@1/EM", "rag@3/EM", "fid@3/moved_new_town", "rag@1/moved_new_town", "cost/fid_bytes"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics lack %s", k)
		}
	}
	if !strings.Contains(out, "fid@3") {
		t.Errorf("no table:\n%s", out)
	}
}

// gardenRun opens rec's garden world and run (closed when the test ends).
func gardenRun(t *testing.T, rec *configs.Recipe) (*ragkit.GardenRun, *ragkit.Data) {
	t.Helper()
	run, d, _, err := ragkit.NewGardenRun(rec, experiment.Options{Out: io.Discard, Progress: io.Discard}, rec.RAG.Chunking, rec.RAG.HeldOutQuestions, false, "")
	if run != nil && run.Log != nil {
		t.Cleanup(func() { run.Log.Close() })
	}
	if err != nil {
		t.Fatal(err)
	}
	return run, d
}

// trainingStudy opens rec's fid stage: the study, its training questions and their top
// max(fid.ks) entries.
func trainingStudy(t *testing.T, rec *configs.Recipe) (*fidStudy, []int, [][]string) {
	t.Helper()
	run, d := gardenRun(t, rec)
	s, err := newFiDStudy(run, d)
	if err != nil {
		t.Fatal(err)
	}
	trainQ := trainedQ(s.d)
	top, err := s.retrieve(s.World, trainQ)
	if err != nil {
		t.Fatal(err)
	}
	return s, trainQ, top
}

// TestFiDExamples: a step's examples are a function of the step; k is one of fid.ks; with
// counterfactual_fraction = 1 an example whose entries hold the gold entry has it rewritten to
// state the new answer, which differs from the gardener's and is a value of the relation.
func TestFiDExamples(t *testing.T) {
	rec := tinyFiDRecipe(t, "")
	s, trainQ, top := trainingStudy(t, rec)
	rewritten := 0
	for step := 0; step < 20; step++ {
		ex, again := s.examples(trainQ, top, step), s.examples(trainQ, top, step)
		for i, e := range ex {
			if !slices.Contains(FiDOf(rec).Ks, len(e.entries)) && len(e.entries) != len(top[0]) {
				t.Fatalf("step %d example %d: %d entries", step, i, len(e.entries))
			}
			if e.answer != again[i].answer || !slices.Equal(e.entries, again[i].entries) {
				t.Fatalf("step %d example %d differs between two calls", step, i)
			}
			if e.answer != e.q.Answer {
				rewritten++
				if !slices.Contains(s.World.Values[e.q.Relation], e.answer) || !slices.ContainsFunc(e.entries, func(p string) bool { return strings.Contains(p, " "+e.answer+" .") }) {
					t.Errorf("step %d example %d: answer %q (was %q) not stated by its entries %q", step, i, e.answer, e.q.Answer, e.entries)
				}
			}
		}
	}
	if rewritten < 20 {
		t.Errorf("%d of 80 examples made counterfactual", rewritten)
	}
}

func TestFiDConfigErrors(t *testing.T) {
	for _, extra := range []string{"ks = [0]", "ks = [3, 3]", "encoder_length = 4", "reader_length = 4096", "batch_size = 0", `init = "bert"`,
		"init = \"lm\"\nlm_steps = 0", "init = \"lm\"\nreader_length = 24\nencoder_length = 30", `cross_init = "self"`, `cross_init = "old"`,
		"encoder_lr_scale = 0", "encoder_lr_scale = -1", "cross_lr_scale = 101"} {
		text := strings.Replace(testkit.RecipeText(t, "rag-small", nil), `kind = "rag"`, `kind = "fusion"`, 1) + "\n[fid]\n" + extra + "\n"
		if _, err := testkit.LoadText(t, filepath.Join(t.TempDir(), "bad.toml"), text); err == nil || !strings.Contains(err.Error(), "fid.") {
			t.Errorf("%s: err = %v, want one naming the fid key", extra, err)
		}
	}
	c := &FiDConfig{Only: true}
	if c.systemName("rag", 3) != "rag@3" || c.systemName("fid", 10) != "fid@10" {
		t.Error("fid.only names")
	}
	c.Only = false
	if c.systemName("rag", 1) != "rag_long@1" || c.systemName("rag", 3) != "rag@3" || c.systemName("fid", 1) != "fid@1" {
		t.Error("a run of every stage names the in-context reader rag_long@1 at k = 1 (rag@1 is the qa stage's), rag@k above")
	}
}

// TestFiDLRScales: fid.encoder_lr_scale reaches every encoder parameter of FiD's training task,
// fid.cross_lr_scale every cross-attention parameter (xattn and its ln_x), and nothing else
// (the decoder's own parameters and the shared word embedding, a decoder parameter, keep 1);
// the defaults leave every scale 1. A step then moves an encoder weight by 0.1 of what the same
// step moves it with scale 1 (Adam's first step is lr·sign(g), weight decay aside).
func TestFiDLRScales(t *testing.T) {
	for _, c := range []struct {
		extra      string
		enc, cross float64
	}{{"", 1, 1}, {"encoder_lr_scale = 0.1\ncross_lr_scale = 3\n", 0.1, 3}} {
		rec := tinyFiDRecipe(t, c.extra)
		run, d := gardenRun(t, rec)
		s, err := newFiDStudy(run, d)
		if err != nil {
			t.Fatal(err)
		}
		task, err := newFiDTask(s, func(int) []fidExample { return nil })
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, p := range task.Params() {
			want, kind := 1.0, "decoder"
			switch {
			case strings.HasPrefix(p.Name, "fid.encoder."):
				want, kind = c.enc, "encoder"
			case strings.Contains(p.Name, ".xattn.") || strings.Contains(p.Name, ".ln_x."):
				want, kind = c.cross, "cross"
			}
			n[kind]++
			if got := p.LRScale; got != want && !(want == 1 && got == 0) {
				t.Errorf("%q: %s has LR scale %g, want %g", c.extra, p.Name, got, want)
			}
		}
		task.Close()
		L := s.fid.Cfg.Layers
		if n["cross"] != 10*L || n["encoder"] != 16*L+2+1 || n["decoder"] != 16*L+2+2 {
			t.Errorf("%q: %v parameters by kind", c.extra, n)
		}
	}
}

// TestFusionRunsEveryStage runs every stage of the kind on the tiny world (fid.only = false,
// 20 fine-tuning steps): the fid stage runs after the swap and names its in-context reader
// rag_long@1 at k = 1, leaving rag@1 to the qa stage's reader, and rag@k above (issue 41's keys).
func TestFusionRunsEveryStage(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end run")
	}
	rec := tinyFusionRecipe(t, "")
	rec.Reader.FinetuneSteps = 20
	var out strings.Builder
	dir, err := experiment.Run(context.Background(), rec, experiment.Options{Out: &out, Progress: io.Discard})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	m, err := experiment.ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rag@1/EM", "rag@1/moved_old_town", "knnlm/EM", "fid@1/EM", "fid@3/moved_new_town", "rag_long@1/EM", "rag@3/EM", "rag@3/moved_new_town", "time/fid_seconds"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics lack %s", k)
		}
	}
	if _, ok := m["rag_long@3/EM"]; ok {
		t.Error("rag_long@3 in a run of every stage: only k = 1 needs the other name")
	}
	if a, b := m["cost/rag@1/seconds_per_question"], m["cost/rag_long@1/seconds_per_question"]; a == b || a == 0 || b == 0 {
		t.Error("rag@1 and rag_long@1 are the same figures: the fid stage overwrote the qa stage's rag@1")
	}
	if !strings.Contains(out.String(), "rag_long@1") || !strings.Contains(out.String(), "rag@3") {
		t.Errorf("no fid table:\n%s", out.String())
	}
}

// lmInit is the [fid] lines of a run whose readers start from the stage's LM.
const lmInit = "init = \"lm\"\nlm_steps = 12\nlm_batch_size = 2\n"

// TestFiDStartsFromLM: with fid.init = "lm" the stage trains the in-context reader as a
// language model, then FiD's encoder and decoder hold its trained weights bit for bit (position
// tables: its first rows); the cross-attention keeps FiD's own initialisation (cross_init =
// "new") or is each layer's self-attention of the LM (ln_x its ln_1; "self").
func TestFiDStartsFromLM(t *testing.T) {
	for _, cross := range []string{"new", "self"} {
		rec := tinyFiDRecipe(t, lmInit+"cross_init = \""+cross+"\"\n")
		run, d := gardenRun(t, rec)
		s, err := newFiDStudy(run, d)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := newFiDStudy(run, d)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.pretrainLM(context.Background()); err != nil {
			t.Fatal(err)
		}
		lm := map[string][]float32{}
		for i, p := range s.reader.Params() {
			lm[p.Name] = p.Value.Data().([]float32)
			if slices.Equal(lm[p.Name], fresh.reader.Params()[i].Value.Data().([]float32)) && !strings.HasSuffix(p.Name, "position") {
				t.Errorf("%s: not trained by the LM phase", p.Name)
			}
		}
		copied, crossed := 0, 0
		for i, p := range s.fid.Params() {
			got := p.Value.Data().([]float32)
			name := p.Name[len("fid.decoder."):]
			if strings.Contains(name, "xattn.") || strings.Contains(name, "ln_x.") {
				want := fresh.fid.Params()[i].Value.Data().([]float32)
				if cross == "self" {
					want = lm["reader."+strings.NewReplacer("xattn.", "attn.", "ln_x.", "ln_1.").Replace(name)]
				}
				if !slices.Equal(got, want) {
					t.Errorf("cross_init %s: %s is not what it should start from", cross, p.Name)
				}
				crossed++
				continue
			}
			src, ok := lm["reader."+name]
			if !ok || !slices.Equal(got, src[:len(got)]) {
				t.Errorf("%s is not the LM's reader.%s bit for bit", p.Name, name)
			}
			copied++
		}
		if want := 10 * s.fid.Cfg.Layers; crossed != want || copied != len(s.fid.Params())-want {
			t.Errorf("cross_init %s: %d parameters copied, %d cross-attention", cross, copied, crossed)
		}
	}
}

// TestFiDFromLMResumeExact is TestFiDResumeExact with fid.init = "lm" (cross_init = "self", a
// causal encoder), interrupted also in the LM phase (step 7, after its checkpoint at 5): the LM,
// FiD and the in-context reader are the uninterrupted run's bit for bit, and so are the metrics.
func TestFiDFromLMResumeExact(t *testing.T) {
	testkit.SkipUnderRace(t)
	if testing.Short() {
		t.Skip("end-to-end runs")
	}
	m, _ := checkResumeExact(t, tinyFiDRecipe(t, lmInit+"cross_init = \"self\"\nencoder_causal = true\n"), []phaseStop{{"fid_lm", 7}, {"fid_fid", 3}, {"fid_rag", 7}}, []string{"fid/lm", "fid/fid", "fid/rag"}, 12)
	for _, k := range []string{"fid@3/EM", "rag@3/EM", "fid_lm/rows", "time/fid_lm_seconds"} {
		if _, ok := m[k]; !ok {
			t.Errorf("metrics lack %s", k)
		}
	}
}
