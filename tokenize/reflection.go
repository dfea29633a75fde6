package tokenize

// Reflection tokens of Self-RAG (Asai et al. 2024, "Self-RAG: Learning to Retrieve, Generate,
// and Critique through Self-Reflection", Table 1): a reader fine-tuned with them judges, in its
// own output, whether to retrieve (Retrieve), whether a passage is relevant to the question
// (IsRel) and whether the passage supports its answer (IsSup). They are special tokens
// (AddSpecialTokens): matched in raw text, never split, written to tokenizer.json.
const (
	RetrieveToken           = "[Retrieve]"
	NoRetrieveToken         = "[No Retrieve]"
	RelevantToken           = "[Relevant]"
	IrrelevantToken         = "[Irrelevant]"
	FullySupportedToken     = "[Fully supported]"
	PartiallySupportedToken = "[Partially supported]"
	NoSupportToken          = "[No support]"
)

// ReflectionTokens returns the seven reflection tokens in the order a reader's vocabulary
// receives them (Retrieve, IsRel, then IsSup tokens).
func ReflectionTokens() []string {
	return []string{RetrieveToken, NoRetrieveToken, RelevantToken, IrrelevantToken,
		FullySupportedToken, PartiallySupportedToken, NoSupportToken}
}
