// Package data loads retrieval collections in the BEIR layout:
//
//	<dir>/corpus.jsonl       one JSON object per line: {"_id", "title", "text"}
//	<dir>/queries.jsonl      one JSON object per line: {"_id", "text"}
//	<dir>/qrels/<split>.tsv  header "query-id<TAB>corpus-id<TAB>score", then one
//	                         judgement per row; graded integer scores, 0 (or less)
//	                         means judged non-relevant
//
// The layout is the one of the BEIR benchmark (Thakur et al., 2021,
// https://github.com/beir-cellar/beir). An optional "metadata" member of a JSON
// line is accepted and ignored; any other member is an error.
//
// Loading is strict: a malformed line, a missing or duplicate id, a qrels row
// with the wrong column count, a non-integer score or an id that names no
// query or document ends the load with an error of the form
//
//	datasets/cranfield/corpus.jsonl:17: invalid JSON: unexpected end of JSON input
//
// naming the file as given, the 1-based line and the field. Nothing is dropped
// silently. Documents whose title and text are both empty are kept (qrels may
// judge them, as Cranfield's 995 is) and listed in Corpus.Empty so that callers
// can report them; a query with empty text is an error. Blank lines are
// skipped. Lines may be of any length.
//
// LoadCorpus holds the whole corpus in memory; a CorpusReader (OpenCorpus) streams the same
// documents one at a time, with the same errors, holding only the ids read so far.
//
// The package is not for tokenization, indexing or sampling: it only turns
// files into ids, texts and judgements (see packages tokenize, index and
// sampler).
package data
