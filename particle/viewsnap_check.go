package particle

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"time"
	"unsafe"
)

// snapEdgeEmbeddings are the chunks of edges of a loaded view snapshot,
// whose embeddings the load neither read nor checked (readChunk): the
// view's edges point at them in the mapping mem. The store checks them
// after the load, in the background (Store.CheckEmbeddings).
type snapEdgeEmbeddings struct {
	mem    []byte
	chunks []chunkEntry
}

// embeddingsCheck is the state of a store's background check of the
// edges' embeddings a view snapshot load left unread.
type embeddingsCheck struct {
	stop chan struct{}
	done chan struct{}
	// Set before done closes.
	chunks, mended int
	err            error
}

// CheckEmbeddings starts the check, in the background, of the edges'
// embeddings a load from the view snapshot left unread (Open starts it
// unless Options.CheckEmbeddingsLater). Close stops it. It does nothing
// for a store not loaded from a snapshot, or after the first call.
func (s *Store) CheckEmbeddings() {
	s.embCheckOnce.Do(func() {
		if s.snapEdges != nil {
			s.startEmbeddingsCheck(s.snapEdges)
			s.snapEdges = nil
		}
	})
}

// startEmbeddingsCheck checks se in the background; Close stops it.
func (s *Store) startEmbeddingsCheck(se *snapEdgeEmbeddings) {
	c := &embeddingsCheck{stop: make(chan struct{}), done: make(chan struct{})}
	s.embCheck = c
	go func() {
		defer close(c.done)
		t := time.Now()
		c.chunks, c.mended, c.err = se.check(c.stop, s.mendEdgeEmbeddings)
		switch {
		case errors.Is(c.err, errCheckStopped):
			s.log.Info("view snapshot: the check of the edges' embeddings stopped by the store's close", "chunks", c.chunks, "mended", c.mended)
		case c.err != nil:
			s.log.Error("view snapshot: the edges' embeddings not checked", "chunks", c.chunks, "mended", c.mended, "err", c.err)
		case c.mended > 0:
			s.log.Error("view snapshot: edge embeddings failed their checksums; read again from the store",
				"chunks", c.chunks, "mended", c.mended, "took", time.Since(t))
		default:
			s.log.Info("view snapshot: the edges' embeddings checked", "chunks", c.chunks, "took", time.Since(t))
		}
	}()
}

// stopEmbeddingsCheck stops the background check, if any, and waits for
// it.
func (s *Store) stopEmbeddingsCheck() {
	s.embCheckOnce.Do(func() { s.snapEdges = nil }) // none starts after this
	if c := s.embCheck; c != nil {
		select {
		case <-c.stop:
		default:
			close(c.stop)
		}
		<-c.done
	}
}

// WaitEmbeddingsChecked waits for the check of the edges' embeddings
// that a load from the view snapshot leaves to the background
// (CheckEmbeddings, which it starts if need be), and returns the chunks
// it checked, those whose checksum failed and whose embeddings it read
// again from Badger, and what stopped it early (nil when it checked them
// all; a store not loaded from a snapshot checks nothing).
func (s *Store) WaitEmbeddingsChecked() (chunks, mended int, err error) {
	s.CheckEmbeddings() // embCheck is set, if ever, once it returns
	c := s.embCheck
	if c == nil {
		return 0, 0, nil
	}
	<-c.done
	return c.chunks, c.mended, c.err
}

// embeddingsMended is the number of chunks of the edges' embeddings the
// check found damaged in the view snapshot's file and read again from
// Badger; call it once the check has ended (stopEmbeddingsCheck).
func (s *Store) embeddingsMended() int {
	if c := s.embCheck; c != nil {
		return c.mended
	}
	return 0
}

// errCheckStopped is check's error when stop closed first.
var errCheckStopped = errors.New("stopped by the store's close")

// check checks the embeddings of every chunk of se against its
// checksum, asking the kernel to read each chunk's ahead of the check of
// the one before, and has mend read again those of a chunk that fails.
// It stops early when stop closes.
func (se *snapEdgeEmbeddings) check(stop <-chan struct{}, mend func(mem []byte, e chunkEntry) error) (chunks, mended int, err error) {
	if len(se.chunks) > 0 {
		willNeed(se.chunks[0].embeddings(se.mem))
	}
	for i, e := range se.chunks {
		select {
		case <-stop:
			return chunks, mended, errCheckStopped
		default:
		}
		if i+1 < len(se.chunks) {
			willNeed(se.chunks[i+1].embeddings(se.mem))
		}
		chunks++
		if crc32.Checksum(e.embeddings(se.mem), crcTable) == e.embCRC {
			continue
		}
		if err := mend(se.mem, e); err != nil {
			return chunks, mended, fmt.Errorf("chunk at %d: %w", e.off, err)
		}
		mended++
	}
	return chunks, mended, nil
}

// mendEdgeEmbeddings reads again from Badger the embeddings of the edges
// of chunk e of the view snapshot mapped at mem, whose checksum failed,
// and writes them where the view's edges read them (the mapping is
// private: the file is left alone). Readers meanwhile may read an
// embedding part old, part new: the old was damaged either way. Each
// edge's int8 code, made from the damaged embedding, is dropped, to be
// made again.
func (s *Store) mendEdgeEmbeddings(mem []byte, e chunkEntry) error {
	var seqs []uint64
	err := s.Snapshot(context.Background(), func(sn *Snapshot) error {
		return walkChunk(mem, e, func(tag uint64, b []byte, x []float32) error {
			if tag == 0 || len(x) == 0 {
				return nil // stored whole, or no embedding: nothing apart
			}
			edge, _, err := decodeEdgeV2(b, false)
			if err != nil {
				return err
			}
			stored, err := sn.Edge(edge.Namespace, edge.ID)
			switch {
			case errors.Is(err, ErrNotFound):
				return nil // deleted since: the view holds it no more
			case err != nil:
				return err
			case len(stored.Embedding) != len(x):
				return nil // its embedding replaced since: the view's edge holds the new one
			}
			copy(x, stored.Embedding)
			seqs = append(seqs, edge.Seq)
			return nil
		})
	})
	if err != nil {
		return err
	}
	s.Read(func(r Reader) {
		for _, seq := range seqs {
			r.v.codes.restale(seq)
		}
	})
	return nil
}

// walkChunk calls fn with each record of chunk e of the snapshot in mem,
// in order: its tag, its bytes and, for a record split from its
// embedding, the embedding (pointing into mem).
func walkChunk(mem []byte, e chunkEntry, fn func(tag uint64, b []byte, x []float32) error) error {
	buf := mem[e.off : e.off+e.recLen]
	var emb []float32
	if e.floats > 0 {
		embBytes := e.embeddings(mem)
		emb = unsafe.Slice((*float32)(unsafe.Pointer(&embBytes[0])), e.floats)
	}
	at, pos := 0, 0
	for range e.values {
		tag, n := binary.Uvarint(buf[at:])
		if n <= 0 {
			return fmt.Errorf("%w: record tag", ErrCorrupt)
		}
		at += n
		b, n := snapBytes(buf[at:])
		if n <= 0 {
			return fmt.Errorf("%w: record length", ErrCorrupt)
		}
		at += n
		var x []float32
		if tag != 0 {
			countPlus1, _, ok := splitTag(tag)
			if !ok {
				return fmt.Errorf("%w: record tag %d", ErrCorrupt, tag)
			}
			if countPlus1 > 0 {
				k := countPlus1 - 1
				if k > uint64(len(emb)-pos) {
					return fmt.Errorf("%w: embedding past the chunk's", ErrCorrupt)
				}
				x = emb[pos : pos+int(k) : pos+int(k)]
				if x == nil {
					x = []float32{} // an empty embedding stays empty, not nil
				}
				pos += int(k)
			}
		}
		if err := fn(tag, b, x); err != nil {
			return err
		}
	}
	if at != len(buf) || pos != len(emb) {
		return fmt.Errorf("%w: %d of %d record bytes and %d of %d floats used", ErrCorrupt, at, len(buf), pos, len(emb))
	}
	return nil
}

// restale makes the code at seq stale (its embedding was mended), so
// that the next reader makes it again; it waits out a reader making it.
func (c *edgeCodes) restale(seq uint64) {
	st := c.stateAt(seq)
	if st == nil {
		return
	}
	for {
		v := st.Load()
		if v == codeBusy {
			runtime.Gosched()
			continue
		}
		if v == codeNone || st.CompareAndSwap(v, codeStale) {
			return
		}
	}
}
