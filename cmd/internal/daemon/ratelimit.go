package daemon

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiter keeps one token bucket per principal.
type limiter struct {
	cfg RateLimitConfig

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	l    *rate.Limiter
	seen time.Time
}

// idleBucket is how long an unused bucket is kept.
const idleBucket = 10 * time.Minute

func newLimiter(cfg RateLimitConfig) *limiter {
	return &limiter{cfg: cfg, buckets: map[string]*bucket{}}
}

// limitFor is the most generous limit among roles (the default when no
// role has its own); 0 requests per second is unlimited.
func (l *limiter) limitFor(roles []string) (float64, int) {
	rps, burst, found := 0.0, 0, false
	for _, r := range roles {
		rl, ok := l.cfg.Roles[r]
		if !ok {
			continue
		}
		if !found || rl.RequestsPerSecond == 0 || (rps != 0 && rl.RequestsPerSecond > rps) {
			rps, burst = rl.RequestsPerSecond, rl.Burst
		}
		found = true
		if rps == 0 {
			break
		}
	}
	if !found {
		return l.cfg.RequestsPerSecond, l.cfg.Burst
	}
	return rps, burst
}

// allow takes a token for id; when there is none it says how long to
// wait for one.
func (l *limiter) allow(id string, roles []string, now time.Time) (bool, time.Duration) {
	rps, burst := l.limitFor(roles)
	if rps == 0 {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.swept) > idleBucket {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > idleBucket {
				delete(l.buckets, k)
			}
		}
		l.swept = now
	}
	b := l.buckets[id]
	if b == nil || b.l.Limit() != rate.Limit(rps) || b.l.Burst() != burst {
		b = &bucket{l: rate.NewLimiter(rate.Limit(rps), burst)}
		l.buckets[id] = b
	}
	b.seen = now
	res := b.l.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}
