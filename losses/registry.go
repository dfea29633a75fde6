package losses

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"
)

// Batch is the kind of batch a loss trains on, which decides the inputs its builder reads.
type Batch string

const (
	// Contrastive: B queries and N >= B passages, passage i < B the positive of query i, every
	// passage a candidate of every query (in-batch and hard negatives). Inputs Q [B,H], P [N,H],
	// Mask [B,N] (optional: -Inf removes a candidate), Temperature and Similarity.
	Contrastive Batch = "contrastive"
	// Lists: B lists of K scored candidates, slot 0 of each the judged-relevant one. Inputs
	// Scores [B*K] (list i at i*K..i*K+K-1), B, K and, when the loss takes labels, Labels [B,K].
	Lists Batch = "lists"
	// LateInteraction: a Contrastive batch of token embeddings (multi-vector, ColBERT). Inputs
	// Q [B,Lq,D], P [N,Ld,D] in Contrastive's passage order, QTokenMask [B,Lq] and PTokenMask
	// [N,Ld] (optional), TokenMasking, Tau, Similarity, and for a Teacher loss Teacher [B,1+M]
	// (Contrastive's layout) with TeacherTau.
	LateInteraction Batch = "late_interaction"
)

// Labels says what a Lists loss reads from its candidates' relevance labels.
type Labels int

const (
	NoLabels     Labels = iota // the loss reads only the slot order (slot 0 is the positive)
	BinaryLabels               // Labels holds 1 for a judged-relevant candidate, 0 otherwise
	GradedLabels               // Labels holds the graded qrels score
)

// Inputs are the graph nodes (and sizes) a loss builder reads; which are set depends on the
// Spec's Batch (and Teacher).
type Inputs struct {
	// Contrastive. Temperature is also the student's temperature of a Lists loss that softmaxes its
	// scores (kl_distill).
	Q, P, Mask  *G.Node
	Temperature float64
	Similarity  Similarity
	// Dims are the embedding prefixes a Matryoshka loss trains on (matryoshka_infonce: every
	// m in Dims, 1 <= m <= H) and DimWeights their weights (nil: all 1).
	Dims       []int
	DimWeights []float64
	// Flops are the FLOPS regulariser's weights of the splade loss, read at every run (the
	// caller updates them between steps).
	Flops *FlopsWeights
	// LateInteraction: the token masks (1 scored, 0 padding or skiplisted; nil scores every
	// token), filled by the caller before every run, and how a masked passage token enters
	// MaxSim. NoMinMax turns off the per-query min-max normalisation of colbert_kl_distill's
	// scores (PyLate's normalize_scores=False).
	QTokenMask, PTokenMask *tensor.Dense
	TokenMasking           TokenMasking
	NoMinMax               bool
	// Lists.
	Scores *G.Node
	B, K   int
	// Labels is the [B,K] tensor a Lists loss with labels reads; the caller fills it before
	// every run, the builder wraps it in a node.
	Labels *tensor.Dense
	// Teacher holds a teacher's scores of the batch's candidates, read by a Spec with Teacher
	// set (distillation). The caller fills it before every run, the builder wraps it in a node;
	// it is a constant of the loss (no gradient), in the Q or Scores dtype. Its shape follows
	// the batch: Lists [B,K], row i the scores of list i's candidates in slot order;
	// Contrastive [B,1+M] for N = B(1+M) passages, row i the score of query i's positive p_i
	// then those of its own hard negatives p_{B+iM} .. p_{B+iM+M-1}.
	Teacher *tensor.Dense
	// TeacherTemperature is the temperature of the teacher's scores, for a loss that softmaxes them
	// (kl_distill).
	TeacherTemperature float64
}

// Spec is one trainable loss: its name (loss.name, rerank.losses), the batch it needs, the
// labels it reads, whether it reads a teacher's scores, and its builder, which returns the
// scalar loss node.
type Spec struct {
	Name   string
	Batch  Batch
	Labels Labels
	// Teacher is set for a distillation loss: it reads Inputs.Teacher (and TeacherTemperature where it
	// softmaxes the teacher's scores), scores of the batch's candidates by a stronger model
	// (a cross-encoder, an LLM) computed before the step.
	Teacher bool
	Build   func(in Inputs) (*G.Node, error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Spec{}
)

// Register makes a loss available by name (as image.RegisterFormat does image formats). It
// panics if the name is taken or the spec is incomplete.
func Register(s Spec) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if s.Name == "" || s.Build == nil || (s.Batch != Contrastive && s.Batch != Lists && s.Batch != LateInteraction) {
		panic(fmt.Sprintf("losses.Register: incomplete spec %+v", s))
	}
	if _, dup := registry[s.Name]; dup {
		panic("losses.Register: loss " + s.Name + " registered twice")
	}
	registry[s.Name] = s
}

// Lookup returns the loss registered under name.
func Lookup(name string) (Spec, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	s, ok := registry[name]
	if !ok {
		return Spec{}, fmt.Errorf("losses: unknown loss %q (registered: %s)", name, strings.Join(names(""), ", "))
	}
	return s, nil
}

// Names returns the registered losses that train on batch (every loss for ""), sorted.
func Names(batch Batch) []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return names(batch)
}

func names(batch Batch) []string {
	var out []string
	for n, s := range registry {
		if batch == "" || s.Batch == batch {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return slices.Clip(out)
}

// listInputs reshapes the scores to [B,K] and wraps the labels in a node.
func listInputs(in Inputs) (*G.Node, *G.Node, error) {
	a, err := G.Reshape(in.Scores, tensor.Shape{in.B, in.K})
	if err != nil {
		return nil, nil, err
	}
	if in.Labels == nil {
		return nil, nil, fmt.Errorf("losses: a list loss with labels built without Inputs.Labels")
	}
	y := G.NewMatrix(in.Scores.Graph(), in.Labels.Dtype(), G.WithShape(in.B, in.K), G.WithValue(in.Labels), G.WithName("labels"))
	return a, y, nil
}

// teacherInput wraps Inputs.Teacher, which must have shape [rows, cols], in a node of g.
func teacherInput(loss string, g *G.ExprGraph, in Inputs, rows, cols int) (*G.Node, error) {
	if in.Teacher == nil {
		return nil, fmt.Errorf("losses: %s: a distillation loss built without Inputs.Teacher", loss)
	}
	if s := in.Teacher.Shape(); !s.Eq(tensor.Shape{rows, cols}) {
		return nil, fmt.Errorf("losses: %s: Inputs.Teacher has shape %v, want (%d, %d)", loss, s, rows, cols)
	}
	return G.NewMatrix(g, in.Teacher.Dtype(), G.WithShape(rows, cols), G.WithValue(in.Teacher), G.WithName(loss+".teacher")), nil
}
