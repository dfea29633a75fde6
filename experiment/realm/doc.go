// Package realm is the recipe kind "realm": a retriever study (study.RunStudy) whose systems train
// retriever and reader jointly over an index refreshed during training (async, sync, off or
// frozen). It registers itself with one experiment.Register call (run and recipe sections) in an
// init.
package realm
