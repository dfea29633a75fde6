// Package rag is the recipe kind "rag": the garden world, a generative reader and joint
// retriever-reader training by the RAG objectives of rag.objectives (rag.go lists the steps). It
// registers itself with one experiment.Register call (run and recipe sections) in an init.
package rag
