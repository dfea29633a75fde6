// Package replug is the recipe kind "replug": a retriever study (study.RunStudy) whose systems
// train the retriever by RePlug from the frozen reader's scores. It registers itself, run and
// [replug] section, with one experiment.Register call; import experiment/kinds.
//
// # Recipe section [replug]
//
// The kind owns the [replug] table (Config, config.go); it also reads the garden kinds' shared
// sections (configs), realm.checkpoint_every and [index_refresh] (with towers = "both"). Every
// key, its default and its meaning (K is the candidates per question):
//
//	key                                 default        meaning
//	replug.systems                      ["supervised", "replug"]  retrievers trained from one start and compared (kind "replug"): "supervised" (InfoNCE on gold entries, train.steps/batch_size/lr), "replug" (RePlug LSR from the frozen reader)
//	replug.towers                       "query"        towers RePlug trains: "query" (index stays exact) or "both" (index refreshed by [index_refresh])
//	replug.steps                        300            RePlug training steps; >= 0
//	replug.batch_size                   16             training questions per RePlug step; >= 1
//	replug.top_k                        8              K: candidates per question scored by the reader, drawn as rag.candidate_source says (dense only with towers = "both"); >= 2
//	replug.lr                           0.0005         peak AdamW learning rate of RePlug; > 0
//	replug.tau_lm                       1.0            temperature of the reader's preference softmax(log p(y|z,x) / tau_lm); > 0
//	replug.score_batch                  64             reader rows scored per forward pass; >= 1
package replug
