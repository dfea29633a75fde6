// Package eval scores ranked runs against relevance judgements with trec_eval's conventions
// (nDCG@k with graded gains, MRR@k, Recall@k, P@k, MAP) and reads and writes runs in the TREC
// format (`qid Q0 docid rank score tag`).
//
// Conventions, all those of trec_eval 9 run as `trec_eval -c`:
//   - A document is relevant when its judged score is > 0; unjudged documents are
//     non-relevant. nDCG uses the judged score as the gain.
//   - Each query's hits are re-sorted by score descending, ties by doc id descending (byte
//     order), ignoring the order and ranks given: trec_eval does this, so equal scores cannot
//     be used to sneak a relevant document up. (The index package breaks ties by doc id
//     ascending; for tied scores the two orders differ, by design of trec_eval.) The Lucene
//     anchor figures of the project kept the run's rank order instead; on Cranfield's test
//     split both give the same figures to 4 decimals (see lucene_test.go).
//   - Only queries of the qrels with at least one relevant document are evaluated; a query of
//     the run absent from the qrels is ignored; a query with relevant documents but absent from
//     the run scores 0 on every metric and counts in the mean (-c).
//   - Every hit of the run is used (no depth cut besides the metric's own @k).
//
// It also scores SciFact claim verification (ScoreSciFact, scifact.go): the four metrics of
// SciFact's official evaluator over predicted abstracts, labels and rationale sentences, with
// readers of SciFact's claims and prediction files.
//
// Not for: significance testing, unjudged-aware metrics (bpref, condensed lists), or
// loading qrels files (package data does that; eval takes the plain map).
package eval
