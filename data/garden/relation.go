package garden

import "fmt"

// Relation is one of a gardener's three facts.
type Relation int

// The three relations, in the order entries state them.
const (
	LivesIn Relation = iota // "X lives in TOWN ."
	Grows                   // "X grows PLANT ."
	Keeps                   // "X keeps ANIMAL ."

	NumRelations = 3
)

// Relations lists every relation in entry order.
var Relations = [NumRelations]Relation{LivesIn, Grows, Keeps}

var relationNames = [NumRelations]string{"lives_in", "grows", "keeps"}

// String returns the name used in files: "lives_in", "grows" or "keeps".
func (r Relation) String() string {
	if r < 0 || r >= NumRelations {
		return fmt.Sprintf("Relation(%d)", int(r))
	}
	return relationNames[r]
}

// ValueType names the type of the relation's values: "town", "plant" or "animal".
func (r Relation) ValueType() string { return [NumRelations]string{"town", "plant", "animal"}[r] }

// factSentence states a fact: "Ines Ronus lives in Kelso ."
func factSentence(name string, r Relation, value string) string {
	switch r {
	case LivesIn:
		return name + " lives in " + value + " ."
	case Grows:
		return name + " grows " + value + " ."
	default:
		return name + " keeps " + value + " ."
	}
}

// newsSentence is the news template of a value type: "A met B in TOWN .", "A sold PLANT to B .",
// "A walked ANIMAL with B ."
func newsSentence(a, b string, r Relation, value string) string {
	switch r {
	case LivesIn:
		return a + " met " + b + " in " + value + " ."
	case Grows:
		return a + " sold " + value + " to " + b + " ."
	default:
		return a + " walked " + value + " with " + b + " ."
	}
}

// Cloze, trained and unseen phrasings of a question about name's fact r.
func cloze(name string, r Relation) string {
	return [NumRelations]string{name + " lives in", name + " grows", name + " keeps"}[r]
}

func trainedForm(name string, r Relation) string {
	return [NumRelations]string{
		"where does " + name + " live ?",
		"what does " + name + " grow ?",
		"what animal does " + name + " keep ?",
	}[r]
}

func unseenForm(name string, r Relation) string {
	return [NumRelations]string{
		"in which town does " + name + " live ?",
		"what is planted by " + name + " ?",
		"what animal is kept by " + name + " ?",
	}[r]
}

// templateWords are the words of every template; no surname may equal one.
var templateWords = []string{
	"lives", "in", "grows", "keeps", "met", "sold", "to", "walked", "with", "where", "does",
	"live", "what", "grow", "animal", "keep", "which", "town", "is", "planted", "by", "kept", "news",
}

// Buckets are the popularity buckets of a fact, by how many biographies state it.
var Buckets = []string{"0", "1-2", "3-9", "10-29", ">=30"}

// Bucket returns the popularity bucket of a fact stated count times in the pretraining corpus.
func Bucket(count int) string {
	switch {
	case count <= 0:
		return "0"
	case count <= 2:
		return "1-2"
	case count <= 9:
		return "3-9"
	case count <= 29:
		return "10-29"
	default:
		return ">=30"
	}
}
