// Package reranker is the recipe kind "reranker": cross-encoders trained on a first stage's
// candidates (BM25 or a retriever run's dense run), one per loss of rerank.losses, evaluated
// reranking that first stage and interpolated with it ([rerank]). It registers itself with one
// experiment.Register call (run and recipe sections) in an init.
//
// # Recipe section [rerank]
//
// The kind owns the [rerank] table (Config, config.go); it also reads the shared sections
// [data], [tokenizer], [model], [pretrain], [train], [index] and [eval] (configs). Every key,
// its default and its meaning:
//
//	key                                 default        meaning
//	rerank.first_stage                  "bm25"         candidate source: "bm25", a dense retriever's run directory or a TREC run file
//	rerank.candidates                   100            K: first-stage hits reranked per evaluated query; >= 1
//	rerank.train_depth                  30             N: first-stage hits per training query that list negatives are drawn from; >= 1
//	rerank.list_size                    8              passages per training list, at least one relevant; 2 <= list_size <= candidates
//	rerank.drop_above_first_positive    false          drop unjudged candidates ranked above the first judged-relevant one (suspected false negatives)
//	rerank.losses                       ["pairwise", "listwise", "pointwise"]  reranker losses trained and compared, each at most once
//	rerank.interpolate                  true           also report alpha * s_first + (1 - alpha) * s_rerank, min-max normalised per query, alpha chosen on dev
//	rerank.match_init                   0.0            gain·I added to the cross-encoder's first-layer query and key projections (a term-matching prior; not with model.init_from, refused with a pretrained body); 0 = off; >= 0
//	rerank.pretrain_depth               30             BM25 hits of a cropped pseudo-query that its pretraining negatives are drawn from (kind reranker, pretrain.steps > 0); >= 1
//	rerank.pretrain_window              0              cropped pseudo-queries come from a passage's first pretrain_window words (the part the cross-encoder sees); 0 = anywhere; >= 0
//	rerank.match_word_scale             1.0            factor on the cross-encoder's initial word embeddings, so a token's word dominates its position and segment; > 0
package reranker
