// Package replug is the recipe kind "replug": a retriever study (ragkit.RunStudy) whose systems
// train the retriever by RePlug from the frozen reader's scores. It registers itself with
// experiment.Register and configs.RegisterKind in an init.
package replug
