package particle

// The coder makes the edges' and nodes' int8 codes (edgecodes.go) on a
// goroutine of its own, so that the planner's expansion finds them
// made. Left to their first readers, codes were made inside planner
// calls: about 1 µs each, with the embedding read cold, a few hundred
// in a call that reaches fresh edges. After each commit the coder makes the codes the
// commit made stale (the embeddings are still warm from the commit);
// [Store.CodeAll] has it make every code, after a load.
//
// The commit only hands over the list of seqs: when the coder lags (its
// queue is full), a commit's list is dropped and those codes are left to
// their first readers, as before. The coder holds the store's read lock
// for coderChunk codes at a time, so a writer waits for at most that.

// coder is the store's code maker.
type coder struct {
	queue chan coderJob
	stop  chan struct{}
	done  chan struct{}
}

// coderJob is the coder's work: the codes of seqs, or of every edge and
// node. done, when set, is closed once the job is over.
type coderJob struct {
	seqs []uint64
	all  bool
	done chan struct{}
}

const (
	// coderQueue is how many commits' lists may wait for the coder.
	coderQueue = 64
	// coderChunk is how many codes the coder makes per hold of the read
	// lock (about 0.3 ms with warm embeddings).
	coderChunk = 256
)

// startCoder starts the store's coder.
func (s *Store) startCoder() {
	c := &coder{queue: make(chan coderJob, coderQueue), stop: make(chan struct{}), done: make(chan struct{})}
	s.coder = c
	go s.runCoder(c)
}

// stopCoder stops the coder and waits for it.
func (s *Store) stopCoder() {
	if c := s.coder; c != nil {
		close(c.stop)
		<-c.done
	}
}

// CodeAll has the coder make the code of every edge and node that has
// none, in the background: a daemon calls it once its store is open, so
// that the first planner calls after a reopen find the codes made.
func (s *Store) CodeAll() { s.toCoder(coderJob{all: true}) }

// WaitCoded returns once the coder has made the codes the commits before
// the call made stale (or the store has closed): a reader that compares
// expansions (a test, a benchmark's warm-up) then finds no code being
// made under it. Readers never need to: a code being made reads as none.
func (s *Store) WaitCoded() { s.syncCoder() }

// syncCoder waits until the coder has done what it was given before
// (or has stopped).
func (s *Store) syncCoder() {
	done := make(chan struct{})
	if s.toCoder(coderJob{done: done}) {
		select {
		case <-done:
		case <-s.coder.done:
		}
	}
}

// toCoder queues job, waiting for room; false if the coder stopped.
func (s *Store) toCoder(job coderJob) bool {
	select {
	case s.coder.queue <- job:
		return true
	case <-s.coder.stop:
		return false
	}
}

// feedCoder hands the coder the seqs a commit made stale, dropping them
// when the coder lags.
func (s *Store) feedCoder(seqs []uint64) {
	if len(seqs) == 0 {
		return
	}
	select {
	case s.coder.queue <- coderJob{seqs: seqs}:
	default:
	}
}

func (s *Store) runCoder(c *coder) {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case job := <-c.queue:
			if !s.code(job, c.stop) {
				return
			}
			if job.done != nil {
				close(job.done)
			}
		}
	}
}

// code makes the codes job asks for, a chunk at a time, until stop is
// closed; it reports whether it finished.
func (s *Store) code(job coderJob, stop <-chan struct{}) bool {
	next, seqs := uint64(1), job.seqs // next: the next seq, for all
	for job.all || len(seqs) > 0 {
		select {
		case <-stop:
			return false
		default:
		}
		s.mu.RLock()
		if s.closed {
			s.mu.RUnlock()
			return false
		}
		r := Reader{v: s.v}
		if job.all {
			last := uint64(max(len(s.v.edgeSeq), len(s.v.nodeSeq)))
			end := min(last, next+coderChunk)
			for ; next < end; next++ {
				if atSeq(s.v.edgeSeq, next) != nil || atSeq(s.v.nodeSeq, next) != nil {
					r.EmbeddingCode(next)
				}
			}
			job.all = next < last
		} else {
			n := min(len(seqs), coderChunk)
			for _, seq := range seqs[:n] {
				r.EmbeddingCode(seq)
			}
			seqs = seqs[n:]
		}
		s.mu.RUnlock()
	}
	return true
}
