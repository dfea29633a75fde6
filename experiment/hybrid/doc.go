// Package hybrid is the recipe kind "hybrid": hybrids of systems that other kinds' runs saved
// (BM25 and dense from a retriever run, ColBERT from a colbert run, SPLADE from a splade run),
// fused from their TREC files without re-running or training anything, each written as
// runs/<split>.<hybrid>.trec like every other system, with convex weights chosen on dev only.
//
// # Recipe
//
// The kind reads [data] (dir, dev_split, test_split: the judgements the sources were evaluated
// on) and owns [hybrid] (Config):
//
//	[hybrid]
//	systems = ["minilm:bm25", "minilm:finetuned"]   # source systems tabled (with every fused one)
//	depth = 1000                                    # hits read per source list and written per hybrid
//	metrics = ["nDCG@10", "Recall@100"]             # package eval's names and code, as the retriever
//	select_metric = "nDCG@10"                       # the dev metric that chooses convex weights
//	[hybrid.sources]                                # alias = run directory
//	minilm = "latest:scifact-minilm"                # the newest finished run of that recipe in output_dir
//	colbert = "scifact-minilm-colbert-20261205-131830"   # or a directory, relative to output_dir
//	[hybrid.fuse.dense_bm25]                        # a hybrid, by name
//	systems = ["minilm:finetuned", "minilm:bm25"]
//	method = "convex"                               # or "rrf" (rrf_k = 60)
//	grid = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
//
// Every key, its default and its meaning (Config, config.go; NAME is a hybrid's name, the
// sources and fusions are tables of their own, [hybrid.sources] and [hybrid.fuse.NAME]):
//
//	key                                 default        meaning
//	[hybrid.sources]                    {}             alias = "RUN_DIR" (relative to output_dir) or "latest:RECIPE_NAME" (newest finished run of that recipe in output_dir); at least one
//	hybrid.systems                      []             source systems tabled, "alias:system"; every system a fusion names is tabled too, after these
//	hybrid.fuse.NAME.systems            []             the fused source systems, "alias:system"; at least two, distinct
//	hybrid.fuse.NAME.method             ""             "rrf" or "convex"; required
//	hybrid.fuse.NAME.rrf_k              60             k of 1 / (k + rank), method "rrf" only; >= 1
//	hybrid.fuse.NAME.grid               [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]  values a weight may take, method "convex" only: every vector of them summing to 1 is tried on dev; in [0, 1], distinct, at most 20,000 such vectors
//	hybrid.depth                        1000           hits read from each source list (by rank) and written per hybrid; >= 1 and >= every metric's cut-off
//	hybrid.max_hits                     10000          most hits a source file may hold per query (and its size bound: queries x max_hits x 256 bytes); >= depth
//	hybrid.metrics                      ["nDCG@10", "MRR@10", "Recall@100", "Recall@1000", "MAP", "P@10"]  computed for every system on both splits (package eval)
//	hybrid.select_metric                "nDCG@10"      dev metric that chooses the convex weights; one of metrics
//	hybrid.table                        ["nDCG@10", "Recall@100"]  test metrics of results.md; each one of metrics
//
// A source system "alias:system" is read from <source run>/runs/<dev_split>.<system>.trec and
// runs/<test_split>.<system>.trec: both must exist (a retriever run ranks dev only when its
// eval.splits lists it; for one that ranked test only, `train search` over its saved index makes
// the same dev rankings into a source directory of one's own: docs/results/scifact-hybrid.md).
// Relative source directories are taken relative to output_dir, where
// the other recipes put their runs (recipes/scifact-hybrid.toml names its sources by
// "latest:NAME", so that it reads whatever the other SciFact recipes last produced; the run
// records the directories it read in sources.json and log.jsonl, with each file's SHA-256).
//
// # Fusion
//
// Both methods read each source list to its first depth hits (by rank) and cut each fused list
// to depth hits. Ties in a fused score are broken by doc id, ascending (index.SortHits), in the
// TREC file's ranks; the metrics, as for every system of the toolkit, rank by score with
// trec_eval's rule (ties by doc id descending).
//
//   - rrf: Reciprocal Rank Fusion, score(q, d) = sum_i 1 / (k + rank_i(q, d)) over the lists
//     holding d (index.RRF; Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms
//     Condorcet and individual Rank Learning Methods", SIGIR 2009; k = 60 there). Scores are not
//     read, ranks are the file's.
//   - convex: score(q, d) = sum_i w_i phi_i(q, d) with w_i >= 0, sum_i w_i = 1, and phi_i the
//     min-max normalised score of system i, (s - min_q) / (max_q - min_q) over that system's
//     hits for q (1 when they all score the same; 0 for a document the system did not retrieve)
//     (Bruch, Gai and Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS
//     2023: the convex combination of min-max normalised scores, eq. 2). The weights are the
//     vector of grid values summing to 1 (within 1e-9) with the best dev select_metric; among
//     equal ones the first in WeightVectors' order (the first weight varying slowest, grid
//     order as written). Every vector tried and its dev score is a line of log.jsonl; the one
//     chosen is in weights.json.
//
// # Checks
//
// Every source file is checked before anything is written (ReadRun): it exists and is a
// regular file of at most queries x max_hits x 256 bytes (checked from its size before it is
// read); each line has six fields and a finite score and no doc is listed twice for a query
// (eval.ReadTREC); it ranks exactly the split's judged queries (data.Qrels.QueryIDs); every doc
// id is in data.dir's corpus; scores do not increase along a query's ranks; and where the
// source run's metrics.json reports a metric of that system and split, the file scores the
// same against data.dir's judgements (else the run was evaluated on other data). Each error
// names the file, and the line and field where there is one.
//
// # Run directory
//
// recipe.resolved.toml; sources.json (alias -> directory, file -> SHA-256); log.jsonl;
// runs/<split>.<hybrid>.trec for both splits; weights.json; results.md (a markdown table of
// every source system and hybrid: dev select_metric, the test metrics of hybrid.table, index
// bytes, query milliseconds and training seconds read from the source runs' metrics.json where
// they report them — "<system>/index_bytes" or "/total_bytes", "<system>/query_ms",
// "/query_milliseconds" or "/query_search_ms", plus "/query_encode_ms" where a run times the
// query's encoding apart, "train/seconds", 0 for bm25 and zeroshot — a hybrid's as the sum of
// its parts'); and metrics.json, written last:
// "<system>/<metric>" on test and "<system>.<dev_split>/<metric>" on dev for each hybrid (as
// experiment.EvaluateSystems writes them for every kind) and for each source system, named
// "alias:system", with its costs ("alias:system/index_bytes", "/query_ms", "/train_seconds").
//
// The run is a pure function of its inputs: it reads and fuses everything before it creates
// the directory, so a failed run leaves none (experiment.Run removes it), and -resume rewrites
// every file from the directories sources.json recorded, metrics.json last (removed first).
package hybrid
