package experiment

import "time"

// LatencyQueries bounds the queries LoneLatency times.
const LatencyQueries = 100

// LoneLatency is the mean milliseconds of one(i) over the first min(n, LatencyQueries) queries
// i, one call each, as a server answers a request alone: 0 when there is none, and the first
// error of one.
func LoneLatency(n int, one func(i int) error) (float64, error) {
	n = min(n, LatencyQueries)
	if n == 0 {
		return 0, nil
	}
	start := time.Now()
	for i := range n {
		if err := one(i); err != nil {
			return 0, err
		}
	}
	return 1000 * time.Since(start).Seconds() / float64(n), nil
}
