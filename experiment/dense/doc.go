// Package dense holds the bi-encoder pieces the retriever kind shares with the garden kinds
// (package ragkit) and with the speed benchmark (package bench): the InfoNCE training task
// (BiTask, NewBiTask; BiStep for timing it), the contrastive loss of a recipe's [loss], the
// encoder configuration of its [model], the dropout streams of the retriever phases, and the
// exact dense Searcher over a corpus. It runs no recipe.
package dense
