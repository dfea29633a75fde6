// Package checkpoints saves and loads everything a run needs to be used or resumed, and reads and
// writes the safetensors format it is stored in.
//
// A run directory holds one or two checkpoint directories and a pointer file:
//
//	run/latest                          one line: the name of the newest complete checkpoint
//	run/checkpoint-<phase>-<step>/
//	    model.safetensors               every model parameter, F32, under the model's names
//	    config.json                     the architecture config (any JSON value the caller gives)
//	    tokenizer.json                  the tokenizer, byte for byte (optional)
//	    optimizer.safetensors           AdamW moments "m.<param>", "v.<param>"; metadata "step" (optional)
//	    state.safetensors               a task's own tensors, e.g. a cache it fills as it trains (optional)
//	    trainer_state.json              step, phase, epoch, sampler position, seed, best metric, RNG states
//
// Save writes a new checkpoint into a checkpoint.tmp-XXXX directory, renames it into place and
// only then replaces latest (every file and the pointer by temp file, fsync, rename; directories
// fsynced), so a crash mid-save leaves Load returning the previous complete checkpoint, never a
// mix of two. See Save for the exact protocol.
//
// The safetensors reader and writer (WriteSafetensors, ReadSafetensors and their Raw forms)
// follow https://github.com/huggingface/safetensors: an 8-byte little-endian header length N,
// N bytes of JSON header padded with spaces to a multiple of 8, then the tensors' bytes. The
// writer lays files out as the Python library does (byte-identical output for the same tensors);
// the reader checks every offset and names the file and the tensor at fault. They are written
// here rather than taken from github.com/nlpodyssey/safetensors because that module's errors name
// neither file nor tensor for bad offsets, and its header is a Go map (keys ordered differently
// from the Python library's, HTML characters escaped).
//
// The package does not know models, optimizers or trainers: it stores plain named float32
// tensors, a JSON config and a JSON trainer state, and the caller converts to and from its own
// types. It is not a model hub client and does not read PyTorch pickles.
package checkpoints
