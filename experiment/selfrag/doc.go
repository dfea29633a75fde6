// Package selfrag is the recipe kind "selfrag": a Self-RAG reader trained with reflection
// tokens (retrieve, relevance, support) on the garden world and evaluated with reflective
// decoding against plain readers. It registers itself with experiment.Register and
// configs.RegisterKind in an init.
package selfrag
