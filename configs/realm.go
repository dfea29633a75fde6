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

// Replug is the [replug] section: retriever training from a frozen reader's likelihoods
// (Shi et al. 2023, REPLUG LSR).
type Replug struct {
	// Systems are the retrievers trained and compared, each from the same start:
	// "supervised" and "replug". Default ["supervised", "replug"].
	Systems []string `toml:"systems"`
	// Towers are the towers RePlug trains: "query" (the index stays exact) or "both" (the
	// index goes stale and [index_refresh] refreshes it). Default "query".
	Towers string `toml:"towers"`
	// Steps is the RePlug training steps; >= 0. Default 300.
	Steps int `toml:"steps"`
	// BatchSize is the training questions per step; >= 1. Default 16.
	BatchSize int `toml:"batch_size"`
	// TopK is K, the candidates per question the reader scores, drawn as rag.candidate_source
	// says ("dense" or "bm25+dense"; dense only with towers = "both"); >= 2. Default 8.
	TopK int `toml:"top_k"`
	// LR is the peak AdamW learning rate; > 0. Default 0.0005.
	LR float64 `toml:"lr"`
	// TauLM is the temperature of the reader's preference softmax(log p(y|z,x) / tau_lm);
	// > 0 (a larger one softens a weak reader's noisy preferences, but a flat target pulls
	// the retriever towards uniform over its candidates). Default 1.
	TauLM float64 `toml:"tau_lm"`
	// ScoreBatch is the reader rows scored per forward pass; >= 1. Default 64.
	ScoreBatch int `toml:"score_batch"`
}

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
	replugSystems = []string{"supervised", "replug"}
	replugTowers  = []string{"query", "both"}
	realmSystems  = []string{"supervised", "async", "sync", "off", "frozen"}
	refreshModes  = []string{"async", "sync", "off"}
)

func defaultReplug() Replug {
	return Replug{Systems: []string{"supervised", "replug"}, Towers: "query", Steps: 300, BatchSize: 16, TopK: 8,
		LR: 5e-4, TauLM: 1, ScoreBatch: 64}
}

func defaultRealm() Realm {
	return Realm{Systems: []string{"supervised", "async", "sync"}, Steps: 200, BatchSize: 16, TopK: 4,
		LR: 5e-4, UpdateReader: true, PassageLRScale: 1, CheckpointEvery: 50}
}

func defaultIndexRefresh() IndexRefresh {
	return IndexRefresh{Mode: "async", RefreshEvery: 10, Workers: 1}
}

// generatesWorld reports whether a kind reads its data from [world] rather than data.dir.
func generatesWorld(kind string) bool {
	return kind == "rag" || kind == "replug" || kind == "realm" || kind == "selfrag" || kind == "atlas"
}

// validateRealm checks [replug], [realm] and [index_refresh].
func validateRealm(v *checker, r *Recipe) {
	p := r.Replug
	if len(p.Systems) == 0 {
		v.fail("replug.systems", "must name at least one of %s", quoteList(replugSystems))
	}
	v.distinct("replug.systems", p.Systems)
	for _, s := range p.Systems {
		v.oneOf("replug.systems", s, replugSystems)
	}
	v.oneOf("replug.towers", p.Towers, replugTowers)
	if r.Kind == "replug" && p.Towers == "both" && r.RAG.CandidateSource != "dense" {
		v.fail(v.setOf("replug.towers", "rag.candidate_source"), `replug.towers = "both" retrieves from the refreshed dense index; set rag.candidate_source = "dense"`)
	}
	atLeast(v, "replug.steps", p.Steps, 0)
	atLeast(v, "replug.batch_size", p.BatchSize, 1)
	atLeast(v, "replug.top_k", p.TopK, 2)
	v.positive("replug.lr", p.LR)
	v.positive("replug.tau_lm", p.TauLM)
	atLeast(v, "replug.score_batch", p.ScoreBatch, 1)

	m := r.Realm
	if len(m.Systems) == 0 {
		v.fail("realm.systems", "must name at least one of %s", quoteList(realmSystems))
	}
	v.distinct("realm.systems", m.Systems)
	for _, s := range m.Systems {
		v.oneOf("realm.systems", s, realmSystems)
	}
	atLeast(v, "realm.steps", m.Steps, 0)
	atLeast(v, "realm.batch_size", m.BatchSize, 1)
	atLeast(v, "realm.top_k", m.TopK, 1)
	v.positive("realm.lr", m.LR)
	v.positive("realm.passage_lr_scale", m.PassageLRScale)
	atLeast(v, "realm.passage_warmup_steps", m.PassageWarmupSteps, 0)
	atLeast(v, "realm.checkpoint_every", m.CheckpointEvery, 0)
	for i, seed := range m.Seeds {
		atLeast(v, "realm.seeds", seed, 0)
		if slices.Contains(m.Seeds[:i], seed) {
			v.fail("realm.seeds", "seed %d listed twice", seed)
		}
	}
	if len(m.Seeds) > 0 && m.Seeds[0] != r.Seed {
		v.fail(v.setOf("realm.seeds", "seed"), "the first of realm.seeds is %d, want the top-level seed = %d (the run at seed is one of the seeds)", m.Seeds[0], r.Seed)
	}

	if r.Kind == "realm" && r.Model.SharedTowers && slices.Contains(m.Systems, "frozen") {
		v.fail(v.setOf("realm.systems", "model.shared_towers"), `realm.systems "frozen" freezes the passage tower, which model.shared_towers = true shares with the query tower; set shared_towers = false`)
	}

	x := r.IndexRefresh
	v.oneOf("index_refresh.mode", x.Mode, refreshModes)
	atLeast(v, "index_refresh.refresh_every", x.RefreshEvery, 1)
	atLeast(v, "index_refresh.workers", x.Workers, 1)
	atLeast(v, "index_refresh.swap_after", x.SwapAfter, 0)
	if x.SwapAfter > 0 && x.SwapAfter >= x.RefreshEvery {
		v.fail(v.setOf("index_refresh.swap_after", "index_refresh.refresh_every"),
			"index_refresh.swap_after = %d must be below index_refresh.refresh_every = %d (a refresh due while one waits for its swap would be skipped)", x.SwapAfter, x.RefreshEvery)
	}
}
