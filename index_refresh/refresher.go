package indexrefresh

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ragtrain/ragtrain/index"
	"github.com/ragtrain/ragtrain/index/ann"
	"github.com/ragtrain/ragtrain/model"
)

// Mode is the recipe's refresh switch.
type Mode string

const (
	// ModeAsync re-encodes in the background while training goes on (REALM).
	ModeAsync Mode = "async"
	// ModeSync blocks training until the re-encoded index serves (the baseline).
	ModeSync Mode = "sync"
	// ModeOff never refreshes: the starting index serves the whole run.
	ModeOff Mode = "off"
)

// ParseMode accepts "async", "sync" and "off".
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAsync, ModeSync, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("index_refresh: mode %q: want \"async\", \"sync\" or \"off\"", s)
}

// Options configure a Refresher.
type Options struct {
	// Mode is ModeAsync, ModeSync or ModeOff.
	Mode Mode
	// Every is the refresh period in training steps (the recipe's refresh_every): a refresh is
	// due at every step that is a multiple of Every and later than the serving version's step.
	// It must be >= 1 unless Mode is ModeOff.
	Every int
	// Workers bounds the encoding goroutines of one refresh (>= 1).
	Workers int
	// ShardSize is the number of corpus rows a worker encodes at a time; 0 cuts the corpus
	// into 4 shards per worker. A multiple of the encoder's batch size avoids padded batches.
	ShardSize int
	// SwapAfter, in ModeAsync, makes the swap step deterministic: a refresh started at step s
	// is installed by MaybeRefresh at step s+SwapAfter, which waits for it if needed. 0 swaps
	// as soon as the encoding finishes, at a step that depends on timing (see the package doc).
	SwapAfter int
	// NewWorker makes each worker's encoder (see WorkerFactory). Required unless Mode is
	// ModeOff or Reencode is set.
	NewWorker WorkerFactory
	// Reencode, when set, encodes the whole corpus for a refresh instead of the Workers
	// goroutines (Workers, ShardSize and NewWorker are then unused): it returns the n×dim
	// vectors of corpus rows 0..n-1 computed with snap's weights, e.g. by handing the
	// re-encoding to the Beam pipeline of package pipeline (pipeline.Reencoder), which may run
	// on other machines. It should return promptly with ctx's error once ctx is done.
	Reencode func(ctx context.Context, snap Snapshot, n, dim int) ([]float32, error)
	// OnEvent, if set, is told of every refresh that starts, swaps in or fails. It is called
	// on the goroutine of MaybeRefresh, Wait, Close or the refresh itself, one event at a
	// time, and must not call MaybeRefresh, Wait or Close.
	OnEvent func(Event)
	// ANNThreshold, when > 0, builds each index version over a corpus of at least this many
	// passages as an HNSW graph of parameters ANN (ann.New) instead of index.Flat: Search and
	// SearchBatch are then approximate (Score stays exact). 0 is always exact.
	ANNThreshold int
	// ANN are the HNSW parameters (zero fields take ann.DefaultParams').
	ANN ann.Params
}

// validate checks o for a Refresher.
func (o Options) validate() error {
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return err
	}
	if o.Mode == ModeOff {
		return nil
	}
	switch {
	case o.Every < 1:
		return fmt.Errorf("index_refresh: refresh every %d steps: must be >= 1", o.Every)
	case o.Workers < 1 && o.Reencode == nil:
		return fmt.Errorf("index_refresh: workers %d: must be >= 1", o.Workers)
	case o.ShardSize < 0:
		return fmt.Errorf("index_refresh: shard size %d: must be >= 0", o.ShardSize)
	case o.SwapAfter < 0:
		return fmt.Errorf("index_refresh: swap after %d steps: must be >= 0", o.SwapAfter)
	case o.SwapAfter > 0 && o.Mode != ModeAsync:
		return fmt.Errorf("index_refresh: swap after %d steps needs mode %q, not %q", o.SwapAfter, ModeAsync, o.Mode)
	case o.NewWorker == nil && o.Reencode == nil:
		return fmt.Errorf("index_refresh: mode %q needs Options.NewWorker or Options.Reencode", o.Mode)
	}
	return nil
}

// encode returns the n×dim vectors of a refresh with snap: Reencode's when set, else Encode's.
func (o Options) encode(ctx context.Context, snap Snapshot, n, dim int) ([]float32, error) {
	if o.Reencode == nil {
		return Encode(ctx, snap, n, dim, o)
	}
	v, err := o.Reencode(ctx, snap, n, dim)
	if err == nil && len(v) != n*dim {
		err = fmt.Errorf("index_refresh: Reencode for %s returned %d values for %d rows of dim %d", snap.Version(), len(v), n, dim)
	}
	return v, err
}

// EventKind says what happened to a refresh.
type EventKind int

const (
	// Started: the parameters were snapshotted and re-encoding began.
	Started EventKind = iota
	// Swapped: the new index serves from now on.
	Swapped
	// Failed: the refresh failed or was cancelled; the old index keeps serving.
	Failed
)

func (k EventKind) String() string {
	switch k {
	case Started:
		return "started"
	case Swapped:
		return "swapped"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event reports one step in the life of a refresh.
type Event struct {
	Kind EventKind
	// Version is the version the refresh builds.
	Version Version
	// Step is the training step of the MaybeRefresh call that reported it; for events
	// reported by the background refresh itself, the step it started at.
	Step int
	// Encoding is the refresh's encoding wall time (Swapped and Failed).
	Encoding time.Duration
	// Err is the failure (Failed only); errors.Is(Err, context.Canceled) after Close.
	Err error
}

// Stats are a Refresher's counters. Durations are wall-clock time.
type Stats struct {
	// Serving is the version of the index answering searches.
	Serving Version
	// InFlight reports a refresh started and not yet swapped in or failed.
	InFlight bool
	// Refreshes counts indexes swapped in (the starting index not included); Failed counts
	// refreshes that failed or were cancelled; Skipped counts due steps at which a refresh
	// was still in flight, so none was started.
	Refreshes, Failed, Skipped int
	// Encoding is the time spent re-encoding, summed over refreshes (failed ones included),
	// from the start of encoding to the new index being built.
	Encoding time.Duration
	// Waited is the time training was blocked: snapshotting in MaybeRefresh, MaybeRefresh in
	// ModeSync or at a SwapAfter step, Wait and Close.
	Waited time.Duration
}

// ErrClosed is returned by MaybeRefresh after Close.
var ErrClosed = errors.New("index_refresh: refresher is closed")

// served is one immutable index with its version.
type served struct {
	flat    ann.Searcher // index.Flat or *ann.HNSW
	version Version
}

// job is one refresh. Its result fields are written before done is closed.
type job struct {
	step    int
	version Version
	cancel  context.CancelFunc
	done    chan struct{}

	flat     ann.Searcher // nil on failure
	err      error
	encoding time.Duration

	// Outcome, set by install under Refresher.mu.
	swapped bool
	final   error
}

// Refresher serves searches from the current index version and refreshes it during training.
// Search, SearchBatch, Current, Serving, Staleness, Stats and Err are safe to call from any
// goroutine at any time, also during a refresh and after Close. MaybeRefresh, Wait and Close
// are meant for the training goroutine (they are safe, but concurrent calls make the timing
// counters hard to read).
type Refresher struct {
	ids  []string
	dim  int
	opts Options

	cur    atomic.Pointer[served]
	closed atomic.Bool

	mu       sync.Mutex // guards the fields below
	inflight *job       // started and not yet installed or failed
	last     *job       // the most recently started refresh (Wait reports its outcome)
	lastErr  error
	stats    Stats

	eventMu sync.Mutex // serialises OnEvent calls
	wg      sync.WaitGroup
}

// New returns a Refresher serving the index of the N = len(ids) passages whose H = dim
// embeddings are the rows of vecs (N×H, row-major; copied), labelled v0. It fails on invalid
// options or when index.NewFlat (ann.NewHNSW) rejects ids or vecs.
func New(ids []string, dim int, vecs []float32, v0 Version, opts Options) (*Refresher, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	f, err := ann.New(ids, vecs, dim, opts.ANNThreshold, opts.ANN)
	if err != nil {
		return nil, fmt.Errorf("index_refresh: starting index %s: %w", v0, err)
	}
	r := &Refresher{ids: slices.Clone(ids), dim: dim, opts: opts}
	r.cur.Store(&served{flat: f, version: v0})
	r.stats.Serving = v0
	return r, nil
}

// NewEncoded snapshots params at step, encodes the corpus with them as a refresh would (with
// opts.NewWorker, which is then required in every mode, ModeOff included), and returns a
// Refresher serving that index. The encoding time counts in Stats.Encoding and Stats.Waited.
func NewEncoded(ctx context.Context, ids []string, dim int, params []*model.Param, step int,
	opts Options) (*Refresher, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.NewWorker == nil && opts.Reencode == nil {
		return nil, fmt.Errorf("index_refresh: NewEncoded needs Options.NewWorker or Options.Reencode")
	}
	t0 := time.Now()
	snap, err := TakeSnapshot(params, step)
	if err != nil {
		return nil, err
	}
	vecs, err := opts.encode(ctx, snap, len(ids), dim)
	if err != nil {
		return nil, err
	}
	enc := time.Since(t0)
	r, err := New(ids, dim, vecs, snap.Version(), opts)
	if err != nil {
		return nil, err
	}
	r.stats.Encoding = enc
	r.stats.Waited = time.Since(t0)
	return r, nil
}

// Search returns the top k hits for one query q (length H) and the version that answered it;
// see index.Flat.Search.
func (r *Refresher) Search(q []float32, k int) ([]index.Hit, Version) {
	s := r.cur.Load()
	return s.flat.Search(q, k), s.version
}

// SearchBatch searches the B queries in qs (B×H, row-major), all with one index version, and
// returns B hit lists and that version; see index.Flat.SearchBatch.
func (r *Refresher) SearchBatch(qs []float32, k int) ([][]index.Hit, Version) {
	s := r.cur.Load()
	return s.flat.SearchBatch(qs, k), s.version
}

// Score returns the serving index's score of passage id for query q (as Search scores it), the
// version that answered, and false when id is not indexed.
func (r *Refresher) Score(q []float32, id string) (float64, Version, bool) {
	s := r.cur.Load()
	v, ok := s.flat.Score(q, id)
	return v, s.version, ok
}

// Serving returns the version of the serving index.
func (r *Refresher) Serving() Version { return r.cur.Load().version }

// Staleness returns step - Serving().Step: how many training steps the serving embeddings
// lag behind the document tower at step.
func (r *Refresher) Staleness(step int) int { return step - r.Serving().Step }

// Stats returns the counters so far.
func (r *Refresher) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.stats
	st.Serving = r.Serving()
	st.InFlight = r.inflight != nil
	return st
}

// Err returns the error of the most recent refresh that ended, nil if it swapped in (or none
// ended yet). A failed refresh also shows in Stats.Failed and in a Failed event.
func (r *Refresher) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// MaybeRefresh is called by the training loop once per step, after the optimiser step, with
// the document tower's current parameters. It reports true when it started a refresh
// (ModeAsync) or swapped one in (ModeSync, and ModeAsync at a SwapAfter step).
//
// When step is a multiple of Every, later than the serving version's step, and no refresh is
// in flight, it snapshots params and re-encodes the corpus: in the background (ModeAsync), or
// waiting until the new index serves (ModeSync). ModeOff does nothing. A due step with a
// refresh still in flight is skipped (Stats.Skipped). The refresh is cancelled when ctx ends
// or Close is called, so pass the run's context, not a per-step one.
//
// It returns ErrClosed after Close, a TakeSnapshot error, and in ModeSync (or at a SwapAfter
// step) the refresh's own error; the old index then keeps serving. Errors of background
// refreshes are reported by Err and OnEvent instead.
func (r *Refresher) MaybeRefresh(ctx context.Context, step int, params []*model.Param) (bool, error) {
	if r.closed.Load() {
		return false, ErrClosed
	}
	if r.opts.Mode == ModeOff {
		return false, nil
	}
	swapped := false
	if r.opts.SwapAfter > 0 {
		r.mu.Lock()
		j := r.inflight
		r.mu.Unlock()
		if j != nil && step >= j.step+r.opts.SwapAfter {
			ok, err := r.waitInstall(j, step)
			if err != nil {
				return false, err
			}
			swapped = ok
		}
	}
	if step%r.opts.Every != 0 {
		return swapped, nil
	}

	t0 := time.Now()
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return swapped, ErrClosed
	}
	if step <= r.Serving().Step {
		r.mu.Unlock()
		return swapped, nil
	}
	if r.inflight != nil {
		r.stats.Skipped++
		r.mu.Unlock()
		return swapped, nil
	}
	snap, err := TakeSnapshot(params, step)
	if err != nil {
		r.stats.Waited += time.Since(t0)
		r.mu.Unlock()
		return swapped, fmt.Errorf("index_refresh: step %d: %w", step, err)
	}
	jctx, cancel := context.WithCancel(ctx)
	j := &job{step: step, version: snap.Version(), cancel: cancel, done: make(chan struct{})}
	r.inflight = j
	r.last = j
	r.wg.Add(1)
	r.mu.Unlock()

	r.emit(Event{Kind: Started, Version: j.version, Step: step})
	go r.run(jctx, j, snap)

	if r.opts.Mode == ModeAsync {
		r.addWaited(time.Since(t0))
		return true, nil
	}
	<-j.done
	r.addWaited(time.Since(t0))
	return r.install(j, step, nil)
}

// Wait blocks until the most recently started refresh, if any, has ended, installs it if it
// succeeded (also before its SwapAfter step), and returns its error — also when it had already
// ended, and been installed by its own goroutine, before Wait was called. The time counts in
// Stats.Waited.
func (r *Refresher) Wait() error {
	r.mu.Lock()
	j := r.last
	r.mu.Unlock()
	if j == nil {
		return nil
	}
	_, err := r.waitInstall(j, j.step)
	return err
}

// Close cancels the refresh in flight, if any, waits until every goroutine of the refresher
// has ended, and makes later MaybeRefresh calls fail with ErrClosed. The serving index goes on
// answering searches. Close may be called more than once and from any goroutine.
func (r *Refresher) Close() {
	t0 := time.Now()
	r.mu.Lock()
	r.closed.Store(true)
	if r.inflight != nil {
		r.inflight.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	j := r.inflight
	r.stats.Waited += time.Since(t0)
	r.mu.Unlock()
	if j != nil {
		// Ended but not installed (ModeSync racing Close, or waiting for its SwapAfter step).
		r.install(j, j.step, fmt.Errorf("index_refresh: refresh to %s dropped by Close: %w", j.version, context.Canceled))
	}
}

// waitInstall waits for j and installs it; the wait counts in Stats.Waited.
func (r *Refresher) waitInstall(j *job, step int) (bool, error) {
	t0 := time.Now()
	<-j.done
	r.addWaited(time.Since(t0))
	return r.install(j, step, nil)
}

// run encodes the corpus with snap and builds the new index into j. In ModeAsync without
// SwapAfter it installs it too; otherwise MaybeRefresh or Wait does.
func (r *Refresher) run(ctx context.Context, j *job, snap Snapshot) {
	defer r.wg.Done()
	defer j.cancel()
	t0 := time.Now()
	vecs, err := r.opts.encode(ctx, snap, len(r.ids), r.dim)
	var f ann.Searcher
	if err == nil {
		f, err = ann.New(r.ids, vecs, r.dim, r.opts.ANNThreshold, r.opts.ANN)
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("index_refresh: cancelled after encoding: %w", context.Cause(ctx))
	}
	if err != nil {
		err = fmt.Errorf("index_refresh: refresh started at step %d (%s): %w", j.step, j.version, err)
		f = nil
	}
	j.flat, j.err, j.encoding = f, err, time.Since(t0)
	r.mu.Lock()
	r.stats.Encoding += j.encoding
	r.mu.Unlock()
	if r.opts.Mode == ModeAsync && r.opts.SwapAfter == 0 {
		r.install(j, j.step, nil)
	}
	close(j.done)
}

// install ends j: swaps its index in or records its failure (drop, if not nil, fails a
// successful refresh), and reports the event. It returns whether j swapped in and its error.
// Only the first install of a job has an effect; later ones return the same outcome.
func (r *Refresher) install(j *job, step int, drop error) (bool, error) {
	r.mu.Lock()
	if r.inflight != j {
		swapped, err := j.swapped, j.final
		r.mu.Unlock()
		return swapped, err
	}
	r.inflight = nil
	err := j.err
	if err == nil {
		err = drop
	}
	ev := Event{Kind: Failed, Version: j.version, Step: step, Encoding: j.encoding, Err: err}
	if err != nil {
		r.stats.Failed++
	} else {
		r.cur.Store(&served{flat: j.flat, version: j.version})
		r.stats.Refreshes++
		j.swapped = true
		ev.Kind = Swapped
	}
	j.final = err
	r.lastErr = err
	r.mu.Unlock()
	r.emit(ev)
	return j.swapped, err
}

func (r *Refresher) addWaited(d time.Duration) {
	r.mu.Lock()
	r.stats.Waited += d
	r.mu.Unlock()
}

func (r *Refresher) emit(ev Event) {
	if r.opts.OnEvent == nil {
		return
	}
	r.eventMu.Lock()
	defer r.eventMu.Unlock()
	r.opts.OnEvent(ev)
}
