// Package atlas is the recipe kind "atlas": Atlas' retriever objectives (Izacard et al. 2022)
// side by side on the garden world, each trained from one start with the query tower alone and
// with both towers (the index refreshed asynchronously), the frozen fine-tuned reader the
// teacher. It registers itself with experiment.Register; import experiment/kinds.
package atlas
