package experiment

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// ProgressBar is the bar of a stage's n items of work written to w: "what", the count, the
// elapsed and predicted time, redrawn at most every 200 ms, a newline once finished.
func ProgressBar(w io.Writer, n int, what string) *progressbar.ProgressBar {
	return progressbar.NewOptions(n, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(24), progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionSetPredictTime(true), progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
}
