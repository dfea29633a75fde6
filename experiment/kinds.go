package experiment

import "github.com/ragtrain/ragtrain/configs"

// The six kinds of recipe and what each reads: configs.Load rejects a recipe that
// sets a section its kind does not read, or a loss it cannot train. The sections
// are those the kind's code reads (rec.<Section> in its files and the helpers it
// calls); the losses are loss.name's values (rerank.losses' for the reranker).
func init() {
	// The garden kinds share the rag pipeline: world, tokenizer, reader, the
	// bi-encoder ([model], [loss]), its label-free warm-up ([pretrain]), the
	// optimiser settings ([train]), BM25 ([index]) and the datastore ([rag]).
	garden := func(extra ...string) []string {
		return append([]string{"world", "tokenizer", "reader", "model", "loss", "pretrain", "train", "index", "rag"}, extra...)
	}
	configs.RegisterKind("retriever", configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "loss", "sampler", "pretrain", "train", "index", "eval"},
		Losses:   []string{"infonce"},
	})
	configs.RegisterKind("reranker", configs.KindSpec{
		Sections: []string{"data", "tokenizer", "model", "pretrain", "train", "index", "eval", "rerank"},
		Losses:   []string{"pairwise", "listwise", "pointwise"},
	})
	configs.RegisterKind("rag", configs.KindSpec{Sections: garden(), Losses: []string{"infonce"}})
	// replug reads realm.checkpoint_every (its phase's resume points) and
	// [index_refresh] with replug.towers = "both".
	configs.RegisterKind("replug", configs.KindSpec{Sections: garden("replug", "realm", "index_refresh"), Losses: []string{"infonce"}})
	configs.RegisterKind("realm", configs.KindSpec{Sections: garden("realm", "index_refresh"), Losses: []string{"infonce"}})
	// selfrag builds the bi-encoder of the rag pipeline but neither warms it up nor reads [rag].
	configs.RegisterKind("selfrag", configs.KindSpec{
		Sections: []string{"world", "tokenizer", "reader", "model", "loss", "train", "index", "selfrag"},
		Losses:   []string{"infonce"},
	})
}
