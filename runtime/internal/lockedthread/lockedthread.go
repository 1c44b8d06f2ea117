// Package lockedthread runs work that changes an OS thread's namespaces or filesystem context
// (setns, unshare, a chdir after unshare(CLONE_FS)) on a thread that ends with it.
//
// The goroutine locks its thread and exits still locked, so the Go runtime retires the thread
// instead of handing a thread in foreign namespaces to other goroutines. One thread is
// different: the process's main thread, whose ID is the PID. Go never ends it, only parks it
// for good, and /proc/self names it: /proc/self/mountinfo, /proc/self/net and /proc/self/ns/*
// describe the main thread's namespaces, not the caller's. Work that lands on the main thread
// would leave them describing a pod's network namespace or a private mount namespace for the
// rest of the process's life. So the work never runs there: a goroutine that finds itself on
// the main thread holds it (locked, so nothing else is scheduled on it) until the work has
// started on another thread, and then gives it back unchanged.
package lockedthread

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Go starts fn on a locked thread that is not the main thread and ends when fn returns.
func Go(fn func()) {
	go func() {
		runtime.LockOSThread()
		run(fn)
	}()
}

// Run runs fn as Go does and returns its error once it has returned.
func Run(fn func() error) error {
	errc := make(chan error, 1)
	Go(func() { errc <- fn() })
	return <-errc
}

// run is the body of Go's goroutine, which has locked its thread.
func run(fn func()) {
	if unix.Gettid() != unix.Getpid() {
		fn()
		return
	}
	// While this goroutine holds the main thread, the one Go starts cannot be scheduled on it,
	// so it passes the check above at once and fn starts elsewhere.
	moved := make(chan struct{})
	Go(func() {
		close(moved)
		fn()
	})
	<-moved
	runtime.UnlockOSThread()
}
