package particle

import (
	"context"
	"runtime/trace"
	"sync/atomic"
	"time"
)

// The regions of an execution trace (runtime/trace) that [Store.Update]
// marks on the writer's goroutine, one for each stage of UpdateTimes: a
// trace then tells how much of each stage the writer ran on a CPU,
// waited for one, or waited on something else (Badger's commit, a lock,
// the kernel). Outside a trace they cost a check.
const (
	RegionApply   = "particle.apply"
	RegionEncode  = "particle.encode"
	RegionCommit  = "particle.commit"
	RegionPublish = "particle.publish"
)

// nextRegion ends the region r and starts one of the given type.
func nextRegion(ctx context.Context, r *trace.Region, typ string) *trace.Region {
	r.End()
	return trace.StartRegion(ctx, typ)
}

// UpdateTimes is how long a store's committed batches ([Store.Update])
// took since it was opened, by stage: where a writer's time goes. The
// stages run one after the other on the writer's goroutine, so their sum
// over a stretch of time, against its length, is how busy the writer
// was: near 1, the next batch waits for this one.
type UpdateTimes struct {
	Batches int64 `json:"batches"`
	// Apply is the caller's function (an ingest's decoding of messages
	// into the batch's changes).
	Apply time.Duration `json:"apply_ns"`
	// Encode is encoding the changes into the Badger transaction.
	Encode time.Duration `json:"encode_ns"`
	// Commit is Badger's commit: its writes to the value log and the
	// memtable and, with SyncWrites, its fsyncs.
	Commit time.Duration `json:"commit_ns"`
	// Publish is showing the changes in the view and telling the
	// subscribers (a daemon's vector indexer and keyword index queue them).
	Publish time.Duration `json:"publish_ns"`
}

// Total is the time of every stage.
func (t UpdateTimes) Total() time.Duration { return t.Apply + t.Encode + t.Commit + t.Publish }

// ByStage is t by stage name: apply, encode, commit, publish.
func (t UpdateTimes) ByStage() map[string]time.Duration {
	return map[string]time.Duration{"apply": t.Apply, "encode": t.Encode, "commit": t.Commit, "publish": t.Publish}
}

// Sub is t less an earlier reading.
func (t UpdateTimes) Sub(earlier UpdateTimes) UpdateTimes {
	return UpdateTimes{Batches: t.Batches - earlier.Batches, Apply: t.Apply - earlier.Apply, Encode: t.Encode - earlier.Encode,
		Commit: t.Commit - earlier.Commit, Publish: t.Publish - earlier.Publish}
}

// updateTimer is UpdateTimes, added to by every committed batch.
type updateTimer struct{ batches, apply, encode, commit, publish atomic.Int64 }

// committed counts a batch whose first stages ended at the given times,
// from start. It is called before the batch is published, so that whoever
// sees the batch's changes finds it counted (its publishing, counted by
// published, may not be yet).
func (u *updateTimer) committed(start, applied, encoded, committed time.Time) {
	u.batches.Add(1)
	u.apply.Add(int64(applied.Sub(start)))
	u.encode.Add(int64(encoded.Sub(applied)))
	u.commit.Add(int64(committed.Sub(encoded)))
}

// published counts a batch's publishing, which took d.
func (u *updateTimer) published(d time.Duration) { u.publish.Add(int64(d)) }

func (u *updateTimer) load() UpdateTimes {
	return UpdateTimes{Batches: u.batches.Load(), Apply: time.Duration(u.apply.Load()), Encode: time.Duration(u.encode.Load()),
		Commit: time.Duration(u.commit.Load()), Publish: time.Duration(u.publish.Load())}
}

// UpdateTimes returns how long the store's committed batches took since
// it was opened, by stage.
func (s *Store) UpdateTimes() UpdateTimes { return s.updates.load() }
