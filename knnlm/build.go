package knnlm

import (
	"fmt"

	"github.com/ragtrain/ragtrain/model"
)

// BuildReader fills a datastore over a corpus with the garden GPT-2 reader: one pair per
// position t of every row but its last, keyed by the reader's key at t (model.KeyRunner: the
// last layer's FFN input) and valued by the row's token t+1. Rows (token ids, 1..L each) go
// through the runner B at a time; done, if not nil, is told how many rows each batch held.
func BuildReader(kr *model.KeyRunner, rows [][]int, precision string, done func(int)) (*Store, error) {
	H := kr.Hidden()
	s, err := NewStore(H, precision)
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(rows); start += kr.B {
		batch := rows[start:min(start+kr.B, len(rows))]
		_, keys, err := kr.Run(batch)
		if err != nil {
			return nil, fmt.Errorf("knnlm: rows %d..%d: %w", start, start+len(batch)-1, err)
		}
		for i, r := range batch {
			for t := 0; t+1 < len(r); t++ {
				row := (i*kr.L + t) * H
				if err := s.Add(keys[row:row+H], r[t+1]); err != nil {
					return nil, err
				}
			}
		}
		if done != nil {
			done(len(batch))
		}
	}
	return s, nil
}

// BuildLlama fills a datastore over a corpus with a LLaMA decoder (its keys: the last layer's
// MLP input, LlamaDecoder.ForwardKeys, which skips the last MLP and the head): one pair per
// position t of every sequence but its last, valued by token t+1. Each sequence runs alone with
// a fresh cache of its length; done, if not nil, is told 1 per sequence.
func BuildLlama(d *model.LlamaDecoder, seqs [][]int, precision string, done func(int)) (*Store, error) {
	H := d.Hidden()
	s, err := NewStore(H, precision)
	if err != nil {
		return nil, err
	}
	for i, seq := range seqs {
		if len(seq) < 2 {
			continue
		}
		c, err := d.NewCache(len(seq))
		if err != nil {
			return nil, err
		}
		keys, err := d.ForwardKeys([]*model.LlamaCache{c}, [][]int{seq})
		if err != nil {
			return nil, fmt.Errorf("knnlm: sequence %d: %w", i, err)
		}
		for t := 0; t+1 < len(seq); t++ {
			if err := s.Add(keys[t*H:(t+1)*H], seq[t+1]); err != nil {
				return nil, err
			}
		}
		if done != nil {
			done(1)
		}
	}
	return s, nil
}
