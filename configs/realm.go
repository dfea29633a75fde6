package configs

import "slices"

// The sections read by kind = "replug" and kind = "realm". Both run the rag pipeline first
// (the [world], the reader of [reader] pretrained and fine-tuned, the bi-encoder of [model]
// warmed up by the cropping of [pretrain]; rag.chunking, rag.held_out_questions), then train
// retrievers from that one start and compare them:
//
//   - "supervised": InfoNCE on the world's gold entries (passage labels; the ceiling), with
//     train.steps, train.batch_size and train.lr;
//   - "replug" (kind "replug"): RePlug LSR from the frozen fine-tuned reader ([replug]);
//   - "async", "sync", "off" (kind "realm"): REALM-style joint training of both towers and the
//     reader with RAG-Sequence, the corpus index refreshed by [index_refresh] in that mode;
//   - "frozen" (kind "realm"): the same with the document tower frozen (its index exact).

// Realm is the [realm] section: joint training of both towers and the reader with
// RAG-Sequence while the corpus index is refreshed (Guu et al. 2020).
type Realm struct {
	// Systems are the retrievers trained and compared, each from the same start:
	// "supervised", "async", "sync", "off" (REALM joint training with that refresh mode)
	// and "frozen" (REALM with the document tower frozen; needs model.shared_towers = false).
	// Default ["supervised", "async", "sync"].
	Systems []string `toml:"systems"`
	// Steps is the joint training steps per REALM system; >= 0. Default 200.
	Steps int `toml:"steps"`
	// BatchSize is the training questions per step; >= 1. Default 16.
	BatchSize int `toml:"batch_size"`
	// TopK is K, the candidates per question retrieved from the serving index; >= 1.
	// Default 4.
	TopK int `toml:"top_k"`
	// LR is the peak AdamW learning rate; > 0. Default 0.0005.
	LR float64 `toml:"lr"`
	// UpdateReader trains the reader jointly with the towers. Default true.
	UpdateReader bool `toml:"update_reader"`
	// InBatchNegatives normalises each question's retrieval distribution over every candidate
	// of the batch, the other questions' candidates generating its answer with probability 0
	// (losses.RAGSequenceInBatch), instead of over its own top_k. Default false.
	InBatchNegatives bool `toml:"in_batch_negatives"`
	// PassageLRScale multiplies realm.lr for the passage tower of the REALM systems that train
	// it ("async", "sync", "off"); > 0. Default 1.
	PassageLRScale float64 `toml:"passage_lr_scale"`
	// ClipPerTower clips the passage tower's gradient by its own norm (train.grad_clip), apart
	// from the query tower's and the reader's, in the systems that train it. Default false.
	ClipPerTower bool `toml:"clip_per_tower"`
	// PassageWarmupSteps keeps the passage tower frozen for the first steps of those systems
	// (the query tower and the reader train alone), then trains it; >= 0. Default 0.
	PassageWarmupSteps int `toml:"passage_warmup_steps"`
	// CheckpointEvery is the steps between checkpoints of a REALM or RePlug phase (resume
	// points); 0 saves only at its end; >= 0. Default 50.
	CheckpointEvery int `toml:"checkpoint_every"`
	// Seeds, when set, trains each REALM system of systems ("async", "sync", "off", "frozen";
	// not "supervised", the ceiling, trained once at seed) once per seed from the same saved
	// start, the seed taking the place of the top-level seed in that system's training (its
	// question order; the refresh timing is fixed by [index_refresh]), and reports each seed's
	// metrics and their mean and standard deviation (experiment/realm). The first must be the
	// top-level seed, so the run at seed is one of them; distinct, each >= 0. Default [] (each
	// system once, at seed).
	Seeds []int64 `toml:"seeds"`
}

// IndexRefresh is the [index_refresh] section: the refresher of the corpus index while the
// document tower trains (package index_refresh).
type IndexRefresh struct {
	// Mode is "async" (re-encode in the background), "sync" (training waits) or "off"
	// (never refresh); read by replug.towers = "both" (realm names the mode per system).
	// Default "async".
	Mode string `toml:"mode"`
	// RefreshEvery is the refresh period in training steps; >= 1. Default 10.
	RefreshEvery int `toml:"refresh_every"`
	// Workers bounds the encoding goroutines of one refresh; >= 1. Default 1.
	Workers int `toml:"workers"`
	// SwapAfter, in async mode, installs a refresh started at step s exactly at step
	// s + swap_after (waiting for it if needed), so runs are deterministic; 0 swaps whenever
	// the encoding finishes; >= 0. Default 0.
	SwapAfter int `toml:"swap_after"`
}

var (
	realmSystems = []string{"supervised", "async", "sync", "off", "frozen"}
	refreshModes = []string{"async", "sync", "off"}
)

func defaultRealm() Realm {
	return Realm{Systems: []string{"supervised", "async", "sync"}, Steps: 200, BatchSize: 16, TopK: 4,
		LR: 5e-4, UpdateReader: true, PassageLRScale: 1, CheckpointEvery: 50}
}

func defaultIndexRefresh() IndexRefresh {
	return IndexRefresh{Mode: "async", RefreshEvery: 10, Workers: 1}
}

// generatesWorld reports whether a kind reads its data from [world] rather than data.dir.
func generatesWorld(kind string) bool {
	spec, ok := LookupKind(kind)
	return ok && slices.Contains(spec.Sections, "world")
}

// validateRealm checks [realm] and [index_refresh].
func validateRealm(v *Checker, r *Recipe) {
	m := r.Realm
	if len(m.Systems) == 0 {
		v.Fail("realm.systems", "must name at least one of %s", quoteList(realmSystems))
	}
	v.DistinctOf("realm.systems", m.Systems, realmSystems)
	AtLeast(v, "realm.steps", m.Steps, 0)
	AtLeast(v, "realm.batch_size", m.BatchSize, 1)
	AtLeast(v, "realm.top_k", m.TopK, 1)
	v.Positive("realm.lr", m.LR)
	v.Positive("realm.passage_lr_scale", m.PassageLRScale)
	AtLeast(v, "realm.passage_warmup_steps", m.PassageWarmupSteps, 0)
	AtLeast(v, "realm.checkpoint_every", m.CheckpointEvery, 0)
	for i, seed := range m.Seeds {
		AtLeast(v, "realm.seeds", seed, 0)
		if slices.Contains(m.Seeds[:i], seed) {
			v.Fail("realm.seeds", "seed %d listed twice", seed)
		}
	}
	if len(m.Seeds) > 0 && m.Seeds[0] != r.Seed {
		v.Fail(v.SetOf("realm.seeds", "seed"), "the first of realm.seeds is %d, want the top-level seed = %d (the run at seed is one of the seeds)", m.Seeds[0], r.Seed)
	}

	if readsKey(r.Kind, "realm.systems") && r.Model.SharedTowers && slices.Contains(m.Systems, "frozen") {
		v.Fail(v.SetOf("realm.systems", "model.shared_towers"), `realm.systems "frozen" freezes the passage tower, which model.shared_towers = true shares with the query tower; set shared_towers = false`)
	}

	x := r.IndexRefresh
	v.OneOf("index_refresh.mode", x.Mode, refreshModes)
	AtLeast(v, "index_refresh.refresh_every", x.RefreshEvery, 1)
	AtLeast(v, "index_refresh.workers", x.Workers, 1)
	AtLeast(v, "index_refresh.swap_after", x.SwapAfter, 0)
	if x.SwapAfter > 0 && x.SwapAfter >= x.RefreshEvery {
		v.Fail(v.SetOf("index_refresh.swap_after", "index_refresh.refresh_every"),
			"index_refresh.swap_after = %d must be below index_refresh.refresh_every = %d (a refresh due while one waits for its swap would be skipped)", x.SwapAfter, x.RefreshEvery)
	}
}
