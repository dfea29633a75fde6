// Package shard stores corpus embeddings as a directory of shard files plus a manifest, and
// searches them exactly, one shard at a time, so that memory stays bounded by the largest
// shard rather than the corpus.
//
// # Layout
//
//	<dir>/manifest.json                      the committed version (Manifest), written last
//	<dir>/emb-<version>-<shard:05d>.shard    one file per shard (WriteShard)
//
// A shard file is little-endian: a 64-byte header (magic "RTSHARD1", dtype, dim, count N,
// shard index, the byte offsets of its sections and the file size), the model hash and index
// version, the N passage ids (an offsets table of N+1 uint64 and the UTF-8 bytes), then, at a
// 64-byte aligned offset, the scales of the dtype (none for float32 and float16, N float32 for
// int8 per vector, dim float32 for int8 per dimension) and the N×dim values, row-major.
//
// # Writing from any number of processes
//
// Each worker calls WriteShard(dir, meta, i, ids, vecs) for the shards it owns; every file is
// written to a temporary name and renamed, so a killed worker leaves no partial shard and a
// repeated one replaces its shard whole. Once every shard is written, one process calls
// CommitManifest(dir, meta, nShards): it checks that shards 0..nShards-1 are all there, agree
// with meta (model hash, version, dim, dtype) and with their own headers and sizes, hold no id
// twice, and that no other shard of that version lies in dir; then it writes manifest.json
// (with every shard's count and sha256) through a temporary file and a rename. Shard file
// names carry the version, so writing version v+1 never touches a file of version v: a Reader
// opened on version v keeps serving it, and one opened after the commit serves v+1 — never a
// mix. CommitShards does the same from the entries the workers' WriteShard calls returned,
// and also refuses a shard whose bytes are no longer those its writer reported. WriteAll
// writes and commits a whole in-process N×H matrix. RemoveStale deletes the shard files the
// manifest does not list.
//
// # Dtypes
//
// Float32 stores the vectors as given. Float16 rounds each value to IEEE 754 half precision
// (nearest, ties to even). Int8PerVector stores round(x/s) in [-127, 127] with one scale
// s = max|x|/127 per vector, Int8PerDim one scale per dimension, over the shard's vectors. A
// search decodes a row to float32 (exactly, for float16; q·s in float32, for int8) and scores
// it like index.Flat. Float16 and int8 trade recall for 2× and 4× less disk and memory traffic;
// the tests measure recall@10 against float32 on clustered random vectors.
//
// # Exactness
//
// Over float32 shards, Reader.Search and Reader.SearchBatch return exactly the hits of
// index.Flat over the same ids and vectors in shard order: the same scores to the bit (both
// score with index.Dot) and the same order, ties by DocID ascending (both collect with
// index.TopK, whose result does not depend on how the rows are split).
//
// Not for: approximate search, incremental updates of a committed version (write a new
// version), or vectors that are not finite.
package shard
