// Package selfrag is the recipe kind "selfrag": a Self-RAG reader trained with reflection tokens
// (retrieve, relevance, support) on the garden world and evaluated with reflective decoding against
// plain readers. It registers itself with one experiment.Register call (run and recipe sections) in
// an init.
//
// # Recipe section [selfrag]
//
// The kind owns the [selfrag] table (Config, config.go); it also reads the shared sections
// [world], [tokenizer], [reader], [model], [loss], [train] and [index] (configs). Every key, its
// default and its meaning:
//
//	key                                 default        meaning
//	selfrag.row_length                  48             L of single-passage reader sequences (kind "selfrag": fine-tuning, per-passage decoding); reader.max_length is the concatenation's; in [8, reader.max_length]
//	selfrag.irrelevant_fraction         0.4            fraction of reflective fine-tuning contexts that are not the gardener's entry (BM25 hits: news naming the gardener, other entries); in [0, 1]
//	selfrag.relevance_loss_weight       0.0            the IsRel decisions get a loss term of their own (their mean NLL x this weight); 0: ordinary target tokens; >= 0
//	selfrag.pair_fraction               0.0            fraction of relevant contexts followed by their minimal-pair negative (same passage, question about a same-first-name gardener with another surname); in [0, 1]
//	selfrag.entry_negative_fraction     0.5            fraction of irrelevant contexts that are a same-first-name gardener's entry rather than news (when both exist); in [0, 1]
//	selfrag.unsupported_fraction        0.1            fraction of relevant contexts whose sentence stating the asked fact is removed (target ends in [No support]); in [0, 1]
//	selfrag.rename_fraction             0.5            fraction of reflective fine-tuning contexts where the gardener gets another surname throughout (names compared, not recalled); in [0, 1]
//	selfrag.rename_surnames             "world"        where renamed surnames come from: "world" (a random world surname, one WordPiece token, never an existing name) or "invented" (mostly 2-4 pieces)
//	selfrag.retrieve_confidence         0.5            [No Retrieve] label when the closed-book LM is right with at least this probability; in [0, 1]
//	selfrag.finetune_steps              800            reflective fine-tuning steps (loss on target tokens, reader.replay rows replayed); >= 0
//	selfrag.batch_size                  48             training questions per reflective fine-tuning step; >= 1
//	selfrag.lr                          0.001          peak AdamW learning rate of reflective fine-tuning; > 0
//	selfrag.top_k                       3              K: BM25 passages scored one by one (and joined by the concatenation baseline); >= 1
//	selfrag.retrieve_threshold          0.5            retrieve when P([Retrieve]) / (P([Retrieve]) + P([No Retrieve])) >= this; in [0, 1]
//	selfrag.relevance_threshold         0.5            answer from a passage only when P([Relevant]) / (P([Relevant]) + P([Irrelevant])) >= this; in [0, 1]
//	selfrag.support_weight              1.0            weight of the support score against relevance when choosing among passing passages; >= 0
package selfrag
