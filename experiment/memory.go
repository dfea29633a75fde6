package experiment

import (
	"fmt"
	"io"
	"strings"

	"github.com/ragtrain/ragtrain/configs"
	"github.com/ragtrain/ragtrain/internal/membudget"
	"github.com/ragtrain/ragtrain/model"
)

// MemoryPart is one model a run trains (model.EstimateTraining): its config Cfg, its largest
// step Shape, and Keys, the recipe keys that size them, as the refusal names them.
type MemoryPart struct {
	Cfg   model.EncoderConfig
	Shape model.TrainingShape
	Keys  string
}

// CheckMemory estimates the memory of training the models of parts before any of them or the
// run directory is made: their parameters, gradients and AdamW moments, all held at once, and
// the activations of the largest step of any one of them (a lower estimate: the garden's joint
// phase steps reader and query tower together). It refuses in one line naming the recipe file
// and the keys what exceeds what the process may allocate (membudget.Check: RLIMIT_AS, cgroup
// memory.max); above the machine's MemAvailable it warns to out and goes on.
func CheckMemory(rec *configs.Recipe, out io.Writer, parts ...MemoryPart) error {
	var e model.MemoryEstimate
	keys := make([]string, len(parts))
	for i, p := range parts {
		pe := model.EstimateTraining(p.Cfg, p.Shape)
		e.Params = model.MemoryEstimate{Params: e.Params, Optimizer: pe.Params}.Total()
		e.Optimizer = model.MemoryEstimate{Params: e.Optimizer, Optimizer: pe.Optimizer}.Total()
		e.Activations = max(e.Activations, pe.Activations)
		keys[i] = p.Keys
	}
	return CheckEstimate(rec, out, e, strings.Join(keys, "; "))
}

// CheckEstimate refuses (or warns about) the estimate e of training the recipe's models as
// CheckMemory does, naming the recipe file and keys, the recipe keys and sizes that make it.
func CheckEstimate(rec *configs.Recipe, out io.Writer, e model.MemoryEstimate, keys string) error {
	what := fmt.Sprintf("%s: %s: parameters %s, gradients and optimizer %s, activations %s", rec.Path, keys,
		membudget.GiB(e.Params), membudget.GiB(e.Optimizer), membudget.GiB(e.Activations))
	return membudget.Check(e.Total(), what, out)
}

// Describe names the sizes of cfg under the recipe section sec ("model", "reader") and the
// vocabulary, as a MemoryPart's Keys do.
func Describe(sec string, cfg model.EncoderConfig) string {
	s := fmt.Sprintf("%s.hidden = %d", sec, cfg.Hidden)
	if sec == "model" {
		s = fmt.Sprintf("model.encoder = %q, ", cfg.Encoder) + s
	}
	if cfg.Encoder == model.EncoderTransformer {
		s += fmt.Sprintf(", %s.layers = %d, %s.ffn = %d, %s.heads = %d", sec, cfg.Layers, sec, cfg.FFN, sec, cfg.Heads)
		if sec == "model" {
			s += fmt.Sprintf(", model.max_position = %d", cfg.MaxPosition)
		}
	}
	return s + fmt.Sprintf(", vocabulary %d", cfg.Vocab)
}

// RetrieverMemory is the bi-encoder cfg of a retriever recipe at its largest step, pretrain or
// train: queries and passages (the positive and sampler.hard_negatives) of train.batch_size
// rows, in chunks of train.mini_batch_size when set, or two crops of each of
// pretrain.batch_size passages.
func RetrieverMemory(rec *configs.Recipe, cfg model.EncoderConfig) MemoryPart {
	Lq, Lp := rec.Tokenizer.QueryLength(), rec.Tokenizer.MaxLength
	rows := rec.Train.BatchSize
	if rec.Train.MiniBatchSize > 0 {
		rows = rec.Train.MiniBatchSize
	}
	tokens := rows*Lq + rows*(1+rec.Sampler.HardNegatives)*Lp
	if rec.Pretrain.Steps > 0 {
		tokens = max(tokens, 2*rec.Pretrain.BatchSize*Lp)
	}
	s := model.TrainingShape{Towers: biTowers(rec), Tokens: tokens, Length: max(Lq, Lp)}
	return MemoryPart{Cfg: cfg, Shape: s, Keys: Describe("model", cfg) + fmt.Sprintf(
		", tokenizer.max_length = %d, %d tokens a step (train.batch_size, train.mini_batch_size, sampler.hard_negatives, pretrain.batch_size)", s.Length, s.Tokens)}
}

// GardenMemory is what a garden recipe (kinds rag, selfrag, replug, realm, atlas) trains, its
// vocabulary the one tokenizer.vocab_size asks for (the tokenizer is trained in the run
// directory; two special tokens added): the GPT-2 reader at its largest step, language-model
// pretraining (reader.pretrain_batch_size rows of reader.max_length tokens, each predicting the
// next), fine-tuning (reader.finetune_batch_size questions and reader.replay packed rows, the
// replayed rows' tokens predicted) or joint training (rag.batch_size x rag.top_k contexts, one
// answer token each at least); and the bi-encoder [model] at its largest step, the cropping
// warm-up (two crops of each of pretrain.batch_size passages) or the joint phase's
// rag.batch_size queries.
func GardenMemory(rec *configs.Recipe, bi model.EncoderConfig) []MemoryPart {
	rd, g, L := rec.Reader, rec.RAG, rec.Reader.MaxLength
	rcfg := model.EncoderConfig{Encoder: model.EncoderTransformer, Vocab: bi.Vocab, Hidden: rd.Hidden, Layers: rd.Layers, Heads: rd.Heads,
		FFN: rd.FFN, MaxPosition: L, Causal: true, Arch: model.ArchGPT2}
	rows, lm := 0, 0
	if rd.PretrainPasses > 0 {
		rows, lm = rd.PretrainBatchSize, rd.PretrainBatchSize*L
	}
	if rd.FinetuneSteps > 0 && rd.FinetuneBatchSize+rd.Replay > rows {
		rows, lm = rd.FinetuneBatchSize+rd.Replay, rd.Replay*L+rd.FinetuneBatchSize
	}
	if g.Steps > 0 && g.BatchSize*g.TopK > rows {
		rows, lm = g.BatchSize*g.TopK, g.BatchSize*g.TopK
	}
	reader := MemoryPart{Cfg: rcfg, Shape: model.TrainingShape{Towers: 1, Tokens: rows * L, Length: L, LMRows: lm}, Keys: Describe("reader", rcfg) +
		fmt.Sprintf(", reader.max_length = %d, %d sequences a step (reader.pretrain_batch_size, reader.finetune_batch_size, reader.replay, rag.batch_size x rag.top_k)", L, rows)}
	Lq := rec.Tokenizer.QueryLength()
	tokens := g.BatchSize * Lq
	if rec.Pretrain.Steps > 0 {
		tokens = max(tokens, 2*rec.Pretrain.BatchSize*rec.Tokenizer.MaxLength)
	}
	s := model.TrainingShape{Towers: biTowers(rec), Tokens: tokens, Length: rec.Tokenizer.MaxLength}
	retriever := MemoryPart{Cfg: bi, Shape: s, Keys: Describe("model", bi) + fmt.Sprintf(
		", tokenizer.max_length = %d, %d tokens a step (pretrain.batch_size, rag.batch_size)", s.Length, s.Tokens)}
	return []MemoryPart{reader, retriever}
}

// biTowers is the bi-encoder's towers: 1 with model.shared_towers, else 2.
func biTowers(rec *configs.Recipe) int {
	if rec.Model.SharedTowers {
		return 1
	}
	return 2
}
