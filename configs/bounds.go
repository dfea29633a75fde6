package configs

// The largest value each size key of a recipe may take. They bound what a recipe can make the
// toolkit allocate before anything is built (a bow encoder has no max_position: its sequences
// are bounded by MaxSeqLength alone), and sit far above every shipped recipe and every
// published encoder of this size class (BERT-large: hidden 1024, 24 layers, ffn 4096, 512
// positions; long-context encoders: 8192 positions). A model within them can still be too
// large for the machine: experiment.CheckMemory estimates that before a model is built.
const (
	MaxSeqLength   = 32768   // tokenizer.max_length, tokenizer.query_max_length, model.max_position, pretrain.crop_max
	MaxHidden      = 16384   // model.hidden
	MaxLayers      = 256     // model.layers
	MaxFFN         = 65536   // model.ffn
	MaxVocab       = 1 << 20 // tokenizer.vocab_size
	MaxBatch       = 1 << 16 // train.batch_size, train.mini_batch_size, pretrain.batch_size
	MaxNegatives   = 1024    // sampler.hard_negatives
	MaxTemperature = 1000.0  // loss.temperature: above it every softmax is uniform to float32 and nothing trains
)

// validateBounds fails the first size key above its maximum.
func validateBounds(v *Checker, r *Recipe) {
	for _, k := range []struct {
		key      string
		val, max int
	}{
		{"tokenizer.max_length", r.Tokenizer.MaxLength, MaxSeqLength},
		{"tokenizer.query_max_length", r.Tokenizer.QueryMaxLength, MaxSeqLength},
		{"tokenizer.vocab_size", r.Tokenizer.VocabSize, MaxVocab},
		{"model.max_position", r.Model.MaxPosition, MaxSeqLength},
		{"model.hidden", r.Model.Hidden, MaxHidden},
		{"model.layers", r.Model.Layers, MaxLayers},
		{"model.heads", r.Model.Heads, MaxHidden},
		{"model.ffn", r.Model.FFN, MaxFFN},
		{"train.batch_size", r.Train.BatchSize, MaxBatch},
		{"train.mini_batch_size", r.Train.MiniBatchSize, MaxBatch},
		{"pretrain.batch_size", r.Pretrain.BatchSize, MaxBatch},
		{"pretrain.crop_max", r.Pretrain.CropMax, MaxSeqLength},
		{"sampler.hard_negatives", r.Sampler.HardNegatives, MaxNegatives},
	} {
		if k.val > k.max {
			v.Fail(k.key, "must be <= %d (configs.Max*, the documented bound), got %d", k.max, k.val)
		}
	}
	if t := r.Loss.Temperature; t > MaxTemperature {
		v.Fail("loss.temperature", "must be <= %g: at %g every score divided by it is 0 to float32 precision and nothing trains", MaxTemperature, t)
	}
}

// WarmupWithinSteps fails a train.warmup_steps that the recipe file sets above train.steps: for
// kinds whose train phase warms up over train.warmup_steps as given (the retriever; the other
// kinds shorten the warm-up to their phases). The default, and a resolved recipe that writes
// every default out, are left alone for short test recipes.
func WarmupWithinSteps(v *Checker, r *Recipe) {
	if tr := r.Train; !v.Resolved() && v.IsSet("train.warmup_steps") && tr.Steps > 0 && tr.WarmupSteps > tr.Steps {
		v.Fail(v.SetOf("train.warmup_steps", "train.steps"), "train.warmup_steps = %d exceeds train.steps = %d: the learning rate would never reach train.lr", tr.WarmupSteps, tr.Steps)
	}
}
