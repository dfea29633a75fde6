// Package atlas is the recipe kind "atlas": Atlas' retriever objectives (Izacard et al. 2022)
// side by side on the garden world, each trained from one start with the query tower alone and
// with both towers (the index refreshed asynchronously), the frozen fine-tuned reader the
// teacher. It registers itself, run and [atlas] section, with one experiment.Register call;
// import experiment/kinds.
//
// # Recipe section [atlas]
//
// The kind owns the [atlas] table (Config, config.go); it also reads the garden kinds' shared
// sections (configs), realm.checkpoint_every and [index_refresh]. Every key, its default and
// its meaning (K is the candidates per question):
//
//	key                                 default        meaning
//	atlas.systems                       ["supervised", "attention_query", "attention_both", "emdr2_query", "emdr2_both", "perplexity_query", "perplexity_both", "loo_query", "loo_both"]  retrievers trained from one start (kind "atlas"): "supervised" or "<objective>_<towers>", objective "attention", "emdr2", "perplexity" or "loo", towers "query" or "both" (index refreshed by [index_refresh])
//	atlas.steps                         200            training steps per system; >= 0
//	atlas.batch_size                    16             training questions per step; >= 1
//	atlas.top_k                         8              K: candidates per question scored by the frozen reader; >= 2
//	atlas.bm25_depth                    20             candidates are BM25's top bm25_depth rescored by the dense retriever (both towers: the serving index); >= top_k
//	atlas.lr                            0.0005         peak AdamW learning rate; > 0
//	atlas.passage_lr_scale              1.0            the passage tower's learning rate is atlas.lr times this ("_both" systems); > 0
//	atlas.tau_attention                 0.05           temperature of the attention teacher softmax(alpha / tau); > 0
//	atlas.tau_lm                        1.0            temperature of the perplexity teacher softmax(log p(y|z,x) / tau); > 0
//	atlas.tau_loo                       1.0            temperature of the leave-one-out teacher softmax(o / tau); > 0
//	atlas.score_batch                   64             reader rows per teacher forward pass; >= 1
package atlas
