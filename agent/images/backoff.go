package images

import (
	"sync"
	"time"
)

// backOff doubles the wait after each failed pull of an image for a pod, from initial to max, and
// forgets an entry that stayed quiet for twice max (so a pod fixed long ago starts afresh).
type backOff struct {
	initial, max time.Duration
	now          func() time.Time

	mu      sync.Mutex
	entries map[string]*backOffEntry
}

type backOffEntry struct {
	wait time.Duration
	last time.Time
}

func newBackOff(initial, max time.Duration, now func() time.Time) *backOff {
	return &backOff{initial: initial, max: max, now: now, entries: map[string]*backOffEntry{}}
}

// inBackOff reports whether the last failure of key is more recent than its wait.
func (b *backOff) inBackOff(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	return ok && b.now().Sub(e.last) < e.wait
}

// next records a failure now.
func (b *backOff) next(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	e, ok := b.entries[key]
	switch {
	case !ok || now.Sub(e.last) > 2*b.max:
		e = &backOffEntry{wait: b.initial}
		b.entries[key] = e
	default:
		e.wait = min(2*e.wait, b.max)
	}
	e.last = now
}

func (b *backOff) reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

func (b *backOff) gc() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for k, e := range b.entries {
		if now.Sub(e.last) > 2*b.max {
			delete(b.entries, k)
		}
	}
}
