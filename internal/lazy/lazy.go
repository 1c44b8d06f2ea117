// Package lazy holds package-level values that are built on first use instead of at init.
//
// Every package linked into nodelet runs its init in every mode, before main: `nodelet runtime`
// runs the agent's too. A package-level variable whose initialiser calls a function (a compiled
// regexp, a filled map, a metric descriptor) puts that call in the package's init, and the init's
// code, the data it reads and what it allocates stay resident in a mode that never uses the value.
// A Value whose New is a function literal is laid out by the compiler with no init code at all:
//
//	var uidPattern = lazy.Value[*regexp.Regexp]{New: func() *regexp.Regexp {
//		return regexp.MustCompile(`^[0-9]+$`)
//	}}
//
//	… uidPattern.Get().MatchString(s) …
package lazy

import "sync"

// Value is built by New on the first Get; concurrent Gets wait for it and share the result.
type Value[T any] struct {
	New  func() T
	once sync.Once
	v    T
}

// Get returns the value, building it on the first call.
func (l *Value[T]) Get() T {
	l.once.Do(func() { l.v = l.New() })
	return l.v
}
