// Package selfrag is the recipe kind "selfrag": a Self-RAG reader trained with reflection tokens
// (retrieve, relevance, support) on the garden world and evaluated with reflective decoding against
// plain readers. It registers itself with one experiment.Register call (run and recipe sections) in
// an init.
package selfrag
