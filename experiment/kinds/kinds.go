// Package kinds registers every recipe kind: a program that runs or loads recipes imports it for
// its side effects,
//
//	import _ "github.com/ragtrain/ragtrain/experiment/kinds"
//
// as a program using database/sql imports its drivers. Each kind lives in its own package over the
// shared base (package experiment) and registers itself in an init with one experiment.Register
// call: its run and what it reads (shared sections, losses, keys, its own sections). Adding a kind
// is a new package and one line here (experiment/internal/toykind: configs and experiment need
// none).
package kinds

import (
	_ "github.com/ragtrain/ragtrain/experiment/atlas"
	_ "github.com/ragtrain/ragtrain/experiment/colbert"
	_ "github.com/ragtrain/ragtrain/experiment/fusion"
	_ "github.com/ragtrain/ragtrain/experiment/hybrid"
	_ "github.com/ragtrain/ragtrain/experiment/knnlmlm"
	_ "github.com/ragtrain/ragtrain/experiment/rag"
	_ "github.com/ragtrain/ragtrain/experiment/readerlm"
	_ "github.com/ragtrain/ragtrain/experiment/realm"
	_ "github.com/ragtrain/ragtrain/experiment/replug"
	_ "github.com/ragtrain/ragtrain/experiment/repluglm"
	_ "github.com/ragtrain/ragtrain/experiment/reranker"
	_ "github.com/ragtrain/ragtrain/experiment/retriever"
	_ "github.com/ragtrain/ragtrain/experiment/scifactverify"
	_ "github.com/ragtrain/ragtrain/experiment/selfrag"
	_ "github.com/ragtrain/ragtrain/experiment/splade"
)
