package garden

import (
	"math"
	"slices"
)

// Updated returns a copy of w in which round(fraction * Gardeners) gardeners, chosen with seed,
// moved to another town (uniform over the other towns). Their entries are rewritten (a
// poisoned town in a moved gardener's entry is replaced by the new town) and their LivesIn
// questions get the new answer, with the pretraining answer in Question.Previous; the
// pretraining corpus and the counts are unchanged, so a closed-book model keeps the old
// answer. Moves lists every moved gardener. fraction must be in [0, 1].
func (w *World) Updated(fraction float64, seed uint64) (*World, error) {
	if err := checkFraction("updated", fraction); err != nil {
		return nil, err
	}
	c := w.clone()
	n := len(c.Gardeners)
	rng := stream(seed, streamUpdate)
	moved := rng.Perm(n)[:int(math.Round(fraction*float64(n)))]
	slices.Sort(moved)
	towns := c.Values[LivesIn]
	entry := c.entryIndex()
	for _, g := range moved {
		gd := &c.Gardeners[g]
		from := gd.Facts[LivesIn]
		to := towns[rng.IntN(len(towns)-1)]
		if to == from { // uniform over the towns other than from
			to = towns[len(towns)-1]
		}
		gd.Facts[LivesIn] = to
		i := slices.IndexFunc(c.Moves, func(m Move) bool { return m.Gardener == g })
		switch {
		case i < 0:
			c.Moves = append(c.Moves, Move{Gardener: g, From: from, To: to})
		case c.Moves[i].From == to: // back in the town the pretraining corpus names
			c.Moves = slices.Delete(c.Moves, i, i+1)
		default:
			c.Moves[i].To = to
		}
		if e := entry[g]; e >= 0 {
			facts := c.Entries[e].Facts
			facts[LivesIn] = to
			c.Entries[e] = gardenerEntry(gd, facts)
			c.Poisons = slices.DeleteFunc(c.Poisons, func(p Poison) bool { return p.Gardener == g && p.Relation == LivesIn })
		}
	}
	slices.SortFunc(c.Moves, func(a, b Move) int { return a.Gardener - b.Gardener })
	c.Questions = c.questions()
	return c, nil
}

// Poisoned returns a copy of w in which round(fraction * covered gardeners) entries, chosen with
// seed, state a wrong value for one of their facts (relation uniform; value uniform over the
// other values of the same type). The gardeners' facts, the questions' answers and the qrels
// are unchanged; Poisons and Question.Poisoned record each replacement. fraction must be in
// [0, 1].
func (w *World) Poisoned(fraction float64, seed uint64) (*World, error) {
	if err := checkFraction("poisoned", fraction); err != nil {
		return nil, err
	}
	c := w.clone()
	var covered []int
	for i := range c.Gardeners {
		if c.Gardeners[i].Covered {
			covered = append(covered, i)
		}
	}
	rng := stream(seed, streamPoison)
	pick := rng.Perm(len(covered))[:int(math.Round(fraction*float64(len(covered))))]
	slices.Sort(pick)
	entry := c.entryIndex()
	for _, k := range pick {
		g := covered[k]
		gd := &c.Gardeners[g]
		r := Relation(rng.IntN(NumRelations))
		vals := c.Values[r]
		wrong := vals[rng.IntN(len(vals)-1)]
		if wrong == gd.Facts[r] {
			wrong = vals[len(vals)-1]
		}
		e := entry[g]
		facts := c.Entries[e].Facts
		facts[r] = wrong
		c.Entries[e] = gardenerEntry(gd, facts)
		c.Poisons = slices.DeleteFunc(c.Poisons, func(p Poison) bool { return p.Gardener == g && p.Relation == r })
		c.Poisons = append(c.Poisons, Poison{Gardener: g, Relation: r, True: gd.Facts[r], Wrong: wrong})
	}
	slices.SortFunc(c.Poisons, func(a, b Poison) int {
		if a.Gardener != b.Gardener {
			return a.Gardener - b.Gardener
		}
		return int(a.Relation - b.Relation)
	})
	c.Questions = c.questions()
	return c, nil
}

// clone copies everything Updated and Poisoned change; the pretraining corpus and the news are
// shared (read-only).
func (w *World) clone() *World {
	c := *w
	c.Gardeners = slices.Clone(w.Gardeners)
	c.Counts = slices.Clone(w.Counts)
	c.Entries = slices.Clone(w.Entries)
	c.Moves = slices.Clone(w.Moves)
	c.Poisons = slices.Clone(w.Poisons)
	return &c
}

// entryIndex returns, per gardener, the index of its entry in w.Entries, or -1.
func (w *World) entryIndex() []int {
	idx := make([]int, len(w.Gardeners))
	for i := range idx {
		idx[i] = -1
	}
	for i := range w.Entries {
		if g := w.Entries[i].Gardener; g >= 0 {
			idx[g] = i
		}
	}
	return idx
}
