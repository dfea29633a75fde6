package export

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ragtrain/ragtrain/data"
	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/internal/atomicfile"
	"github.com/ragtrain/ragtrain/internal/bounded"
	"github.com/ragtrain/ragtrain/model"
	"github.com/ragtrain/ragtrain/tokenize"
)

// File names of a corpus embeddings directory.
const (
	EmbeddingsDir          = "embeddings"     // inside an export
	EmbeddingsFile         = "embeddings.npy" // float32 [N, H], row-major
	IDsFile                = "ids.txt"        // N lines: the corpus id of each row
	EmbeddingsManifestFile = "manifest.json"
	EmbeddingsFormat       = 1 // format_version of manifest.json
)

// EmbeddingsManifest is manifest.json of a corpus embeddings directory: what the vectors are and
// which model made them, so that an index built from them (FAISS, pgvector) can be checked
// against the query encoder that will search it.
type EmbeddingsManifest struct {
	FormatVersion int    `json:"format_version"` // EmbeddingsFormat
	Count         int    `json:"count"`          // N, rows of embeddings.npy and lines of ids.txt
	Dim           int    `json:"dim"`            // H
	DType         string `json:"dtype"`          // "float32" (little-endian, row-major)
	// Normalized: rows have unit L2 norm, so inner product search ranks by cosine similarity.
	Normalized bool   `json:"normalized"`
	Similarity string `json:"similarity"` // the model's similarity, "cosine" or "dot"
	// ModelSHA256 is the SHA-256 (hex) of ModelFile, the passage tower's model.safetensors,
	// relative to the export root: `sha256sum` of that file must print it.
	ModelSHA256 string `json:"model_sha256"`
	ModelFile   string `json:"model_file"`
	// IndexVersion names the encoder state the vectors come from: the training phase and step
	// of the checkpoint ("train-300"). Vectors of two index versions must not be mixed in one
	// index.
	IndexVersion string `json:"index_version"`
	Corpus       string `json:"corpus"`        // the corpus.jsonl encoded
	CorpusSHA256 string `json:"corpus_sha256"` // its SHA-256 (hex)
	TitleField   bool   `json:"title_field"`   // passage text = title + " " + text
	MaxLength    int    `json:"max_length"`    // tokens per passage, [CLS] and [SEP] included
}

// WriteEmbeddings writes embeddings.npy (vecs: len(ids) rows of man.Dim float32), ids.txt and
// manifest.json (with Count, DType and FormatVersion filled in) into dir, creating it. Empty
// ids, ids with a line break and duplicates are errors.
func WriteEmbeddings(dir string, ids []string, vecs []float32, man EmbeddingsManifest) error {
	if man.Dim <= 0 || len(vecs) != len(ids)*man.Dim {
		return fmt.Errorf("%s: %d values for %d ids of dim %d", dir, len(vecs), len(ids), man.Dim)
	}
	seen := make(map[string]int, len(ids))
	for i, id := range ids {
		if id == "" || strings.ContainsAny(id, "\r\n") {
			return fmt.Errorf("%s: id %d (%q) is empty or holds a line break, which ids.txt cannot store", dir, i, id)
		}
		if j, dup := seen[id]; dup {
			return fmt.Errorf("%s: id %q is given for rows %d and %d", dir, id, j, i)
		}
		seen[id] = i
	}
	man.FormatVersion, man.Count, man.DType = EmbeddingsFormat, len(ids), "float32"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteNPYFloat32(filepath.Join(dir, EmbeddingsFile), vecs, len(ids), man.Dim); err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, IDsFile), func(w io.Writer) error {
		for _, id := range ids {
			if _, err := io.WriteString(w, id+"\n"); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return atomicfile.WriteJSON(filepath.Join(dir, EmbeddingsManifestFile), man)
}

// ReadEmbeddings reads a directory written by WriteEmbeddings and checks that the three files
// agree (rows, lines, count, dim).
func ReadEmbeddings(dir string) ([]string, []float32, EmbeddingsManifest, error) {
	var man EmbeddingsManifest
	manPath := filepath.Join(dir, EmbeddingsManifestFile)
	if err := readJSON(manPath, &man, true); err != nil {
		return nil, nil, man, err
	}
	vecs, shape, err := ReadNPYFloat32(filepath.Join(dir, EmbeddingsFile))
	if err != nil {
		return nil, nil, man, err
	}
	if len(shape) != 2 || shape[0] != man.Count || shape[1] != man.Dim {
		return nil, nil, man, fmt.Errorf("%s: shape %v, %s says [%d, %d]", filepath.Join(dir, EmbeddingsFile), shape, manPath, man.Count, man.Dim)
	}
	idPath := filepath.Join(dir, IDsFile)
	f, err := bounded.OpenRegular(idPath)
	if err != nil {
		return nil, nil, man, err
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if sc.Text() == "" {
			return nil, nil, man, fmt.Errorf("%s:%d: empty id", idPath, len(ids)+1)
		}
		ids = append(ids, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, nil, man, fmt.Errorf("%s: %w", idPath, err)
	}
	if len(ids) != man.Count {
		return nil, nil, man, fmt.Errorf("%s: %d ids, %s says count = %d", idPath, len(ids), manPath, man.Count)
	}
	return ids, vecs, man, nil
}

// writeCorpusEmbeddings encodes the run's corpus with tower t (as evaluation does: the recipe's
// title_field, max_length tokens, batches of 64, rows normalised for cosine similarity).
func writeCorpusEmbeddings(dir string, r *Run, t *model.Tower, tok *tokenize.Tokenizer, meta BiEncoderMeta, modelPath, modelRel string) error {
	corpusPath := filepath.Join(r.Recipe.Data.Dir, "corpus.jsonl")
	corpus, err := data.LoadCorpus(corpusPath)
	if err != nil {
		return err
	}
	passages := make([]string, corpus.Len())
	for i := range passages {
		passages[i] = corpus.Passage(i, r.Recipe.Data.TitleField)
	}
	runner, err := model.NewEncoderRunner(t, 64, meta.MaxLength)
	if err != nil {
		return err
	}
	b := tok.EncodeBatch(passages, meta.MaxLength)
	vecs, err := runner.Encode(b.IDs, b.Mask, b.Types, len(passages))
	if err != nil {
		return err
	}
	cosine := meta.Similarity == "cosine"
	dim := t.Dim()
	if d := meta.TruncateDim; d > 0 && d < dim { // a Matryoshka prefix, normalised again for cosine
		cut := make([]float32, len(passages)*d)
		for i := range passages {
			copy(cut[i*d:(i+1)*d], vecs[i*dim:i*dim+d])
		}
		vecs, dim = cut, d
	}
	if cosine {
		index.NormalizeRows(vecs, dim)
	}
	modelSum, err := bounded.SHA256(modelPath)
	if err != nil {
		return err
	}
	corpusSum, err := bounded.SHA256(corpusPath)
	if err != nil {
		return err
	}
	st := r.Checkpoint.Trainer
	version := strconv.Itoa(st.Step)
	if st.Phase != "" {
		version = st.Phase + "-" + version
	}
	return WriteEmbeddings(dir, corpus.IDs, vecs, EmbeddingsManifest{
		Dim: dim, Normalized: cosine, Similarity: meta.Similarity,
		ModelSHA256: modelSum, ModelFile: filepath.ToSlash(filepath.Clean(modelRel)), IndexVersion: version,
		Corpus: corpusPath, CorpusSHA256: corpusSum, TitleField: r.Recipe.Data.TitleField, MaxLength: meta.MaxLength,
	})
}
