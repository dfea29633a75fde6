// Package pin imports the third-party modules every package builds on, so that go.mod
// keeps them at the versions the project was tested with. It has no code of its own.
package pin

import (
	_ "github.com/BurntSushi/toml"
	_ "github.com/blevesearch/go-porterstemmer"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/sugarme/tokenizer"
	_ "go4.org/unsafe/assume-no-moving-gc"
	_ "gorgonia.org/gorgonia"
	_ "gorgonia.org/tensor"
)
