// Package backoff is the agent's one per-key exponential back-off, shared by crash-loop restarts
// and image pulls as in the kubelet.
package backoff

import (
	"sync"
	"time"
)

type backOffEntry struct {
	delay      time.Duration
	lastUpdate time.Time
}

// BackOff is a per-key exponential back-off: initial doubling to max, and an entry quiet for twice max
// starts afresh (a pod fixed long ago is not held back by its old failures). The runtime manager keys
// it by pod UID, container name and spec hash (crash loops); the image manager by pod UID and image.
type BackOff struct {
	mu      sync.Mutex
	now     func() time.Time
	initial time.Duration
	max     time.Duration
	entries map[string]*backOffEntry
}

// New makes a back-off; now may be nil for time.Now.
func New(initial, max time.Duration, now func() time.Time) *BackOff {
	if now == nil {
		now = time.Now
	}
	return &BackOff{now: now, initial: initial, max: max, entries: map[string]*backOffEntry{}}
}

// Next records a failure of key at eventTime and lengthens its delay.
func (b *BackOff) Next(key string, eventTime time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || eventTime.Sub(e.lastUpdate) > 2*b.max {
		b.entries[key] = &backOffEntry{delay: b.initial, lastUpdate: eventTime}
		return
	}
	e.delay *= 2
	if e.delay > b.max {
		e.delay = b.max
	}
	e.lastUpdate = eventTime
}

// InBackOffSince reports whether key is still backing off from a failure at eventTime, and how long remains.
func (b *BackOff) InBackOffSince(key string, eventTime time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return false, 0
	}
	now := b.now()
	if now.Sub(e.lastUpdate) > 2*b.max {
		delete(b.entries, key)
		return false, 0
	}
	remaining := e.delay - now.Sub(eventTime)
	return remaining > 0, remaining
}

// InBackOffSinceUpdate reports whether key's last failure is more recent than its delay.
func (b *BackOff) InBackOffSinceUpdate(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok {
		return false
	}
	return b.now().Sub(e.lastUpdate) < e.delay
}

// Get is the current delay of key (0 when none).
func (b *BackOff) Get(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[key]; ok {
		return e.delay
	}
	return 0
}

// Reset forgets key.
func (b *BackOff) Reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// GC drops entries idle longer than the reset period.
func (b *BackOff) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for k, e := range b.entries {
		if now.Sub(e.lastUpdate) > 2*b.max {
			delete(b.entries, k)
		}
	}
}
