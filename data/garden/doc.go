// Package garden generates the garden world of docs/garden-world.md: a synthetic knowledge
// world whose facts, supporting passages and pretraining frequencies are all known exactly, so
// that readers, RAG joint training, RePlug and reflection tokens can be evaluated by how often
// each fact was seen in pretraining (after Mallen et al. 2023, "When Not to Trust Language
// Models" (PopQA), and Kandpal et al. 2023, "Large Language Models Struggle to Learn Long-Tail
// Knowledge").
//
// A world has Config.Gardeners gardeners, each with a first name from a small shared pool, a
// unique invented surname (1-3 consonant-vowel syllables, never an English word) and three
// facts: the town they live in (skewed: the largest town holds Config.TopTownShare of them),
// the plant they grow and the animal they keep (uniform). Popularity is Zipfian: the gardener
// of rank r is picked with probability proportional to r^-Config.ZipfExponent.
//
// From these, Generate draws
//   - the pretraining corpus: biographies stating one to three facts of a gardener, and news
//     items pairing two gardeners with a value that is neither one's fact, half of them
//     repeating their sentence (the repeat can only be predicted by copying), shuffled;
//   - Counts[g][r], the number of biographies stating fact r of gardener g, and its bucket
//     ("0", "1-2", "3-9", "10-29", ">=30");
//   - the datastore: one three-sentence entry per covered gardener (Config.Coverage of them)
//     and Config.DatastoreNews news items from the corpus, chunked whole, by sentence or in
//     windows of Config.WindowWords words, with qrels marking the chunks that state each fact;
//   - three questions per gardener (cloze, trained and unseen phrasings, one-word answer),
//     split by gardener: ids 0, 4, 8, ... train the reader, the rest are test gardeners.
//
// Updated and Poisoned derive changed worlds (gardeners who moved town; entries stating a wrong
// value) whose pretraining corpus is the original's.
//
// Every random choice comes from math/rand/v2 PCG streams of Config.Seed, one stream per stage,
// and nothing iterates a Go map, so a Config always gives byte-identical files (World.Write).
// Config.Validate names the recipe key of an impossible value ("world.coverage: must be in
// [0, 1], got 1.5").
//
// The package is not for loading the datastore (package data reads the BEIR directories Write
// produces), nor for tokenizing, training or evaluating: it only makes the world.
package garden
