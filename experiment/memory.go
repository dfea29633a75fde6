package experiment

import (
	"fmt"
	"io"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/internal/membudget"
	"github.com/ragtrain/ragtrain/model"
)

// CheckMemory estimates the memory of training the recipe's bi-encoder cfg
// (model.EstimateTraining: parameters, gradients and AdamW moments, and the activations of the
// largest step, pretrain or train, in chunks of train.mini_batch_size when set) before the
// model or the run directory is made, and refuses in one line naming the keys
// what exceeds what the process may allocate (membudget.Check: RLIMIT_AS, cgroup memory.max);
// above the machine's MemAvailable it warns to out and goes on.
func CheckMemory(rec *configs.Recipe, cfg model.EncoderConfig, out io.Writer) error {
	Lq, Lp := rec.Tokenizer.QueryLength(), rec.Tokenizer.MaxLength
	rows := rec.Train.BatchSize
	if rec.Train.MiniBatchSize > 0 {
		rows = rec.Train.MiniBatchSize
	}
	tokens := rows*Lq + rows*(1+rec.Sampler.HardNegatives)*Lp // queries; positives and hard negatives
	if rec.Pretrain.Steps > 0 {
		tokens = max(tokens, 2*rec.Pretrain.BatchSize*Lp) // two crops a passage
	}
	L := max(Lq, Lp)
	e := model.EstimateTraining(cfg, rec.Model.SharedTowers, tokens, L)
	what := fmt.Sprintf("%s: model.encoder = %q, model.hidden = %d", rec.Path, cfg.Encoder, cfg.Hidden)
	if cfg.Encoder == model.EncoderTransformer {
		what += fmt.Sprintf(", model.layers = %d, model.ffn = %d, model.max_position = %d", cfg.Layers, cfg.FFN, cfg.MaxPosition)
	}
	what += fmt.Sprintf(", vocabulary %d, tokenizer.max_length = %d, %d tokens a step (train.batch_size, train.mini_batch_size, sampler.hard_negatives, pretrain.batch_size): parameters %s, gradients and optimizer %s, activations %s",
		cfg.Vocab, L, tokens, membudget.GiB(e.Params), membudget.GiB(e.Optimizer), membudget.GiB(e.Activations))
	return membudget.Check(e.Total(), what, out)
}
