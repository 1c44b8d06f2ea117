package logs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hugeLine is how long the endless line of these tests is: far more than any bound of the reader.
const hugeLine = 200 << 20

// heapBound is what a reader may add to the heap (garbage not yet collected included), whatever
// it reads: generous, but far below one huge line.
const heapBound = 64 << 20

// writePartials appends n bytes of one line in conmon's way (8 KiB partial entries), through a
// small buffer so the test itself holds little.
func writePartials(t testing.TB, f *os.File, n int) {
	t.Helper()
	w := bufio.NewWriterSize(f, 64<<10)
	chunk := strings.Repeat("x", 8<<10)
	for done := 0; done < n; done += len(chunk) {
		fmt.Fprintf(w, "%s stdout P %s\n", at(1), chunk)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
}

// hugeLog writes a log with a line of hugeLine bytes between short ones.
func hugeLog(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(at(0) + " stdout F before\n")
	writePartials(t, f, hugeLine)
	f.WriteString(at(2) + " stdout F end\n")
	for i := range 4 {
		fmt.Fprintf(f, "%s stdout F after %d\n", at(3+i), i)
	}
	return path
}

// heapWatch is a client that records how big the heap got while it was written to.
type heapWatch struct {
	mu        sync.Mutex
	base      uint64
	peak      uint64
	writes    int
	bytes     int64
	sinceLast int64
	first     chan struct{}
	out       bytes.Buffer // only the first and last few KiB
}

func newHeapWatch() *heapWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return &heapWatch{base: ms.HeapAlloc, first: make(chan struct{})}
}

func (h *heapWatch) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.writes == 0 {
		close(h.first)
	}
	h.writes++
	h.bytes += int64(len(p))
	h.sinceLast += int64(len(p))
	if h.writes == 1 || h.sinceLast >= 8<<20 {
		h.sample()
		h.sinceLast = 0
	}
	if h.out.Len() < 4<<10 {
		h.out.Write(p[:min(len(p), 4<<10)])
	}
	return len(p), nil
}

func (h *heapWatch) sample() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
}

func (h *heapWatch) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sample()
	grew := int64(h.peak) - int64(h.base)
	t.Logf("the heap grew by at most %d KiB while reading", grew>>10)
	if grew > heapBound {
		t.Fatalf("the heap grew by %d MiB while reading (bound %d MiB)", grew>>20, heapBound>>20)
	}
}

func TestReadLogsEndlessLineBounded(t *testing.T) {
	path := hugeLog(t)
	t.Run("whole log streams the long line", func(t *testing.T) {
		h := newHeapWatch()
		if err := ReadLogs(context.Background(), path, Options{TailLines: AllLines}, h); err != nil {
			t.Fatal(err)
		}
		h.check(t)
		if h.bytes < hugeLine {
			t.Fatalf("got %d bytes, want the whole line (%d)", h.bytes, hugeLine)
		}
		// Written in pieces as it came, not once at its end.
		if h.writes < hugeLine/maxLineBytes {
			t.Fatalf("%d writes for a %d-byte line", h.writes, hugeLine)
		}
	})
	t.Run("tail 5 cuts the long line", func(t *testing.T) {
		h := newHeapWatch()
		if err := ReadLogs(context.Background(), path, Options{TailLines: 5}, h); err != nil {
			t.Fatal(err)
		}
		h.check(t)
		if h.writes != 5 || h.bytes > maxLineBytes+100 {
			t.Fatalf("tail 5 wrote %d lines, %d bytes", h.writes, h.bytes)
		}
		if !bytes.HasPrefix(h.out.Bytes(), []byte("xxxx")) {
			t.Fatalf("tail 5 starts %.40q, want the long line", h.out.String())
		}
	})
	t.Run("limit bytes", func(t *testing.T) {
		h := newHeapWatch()
		if err := ReadLogs(context.Background(), path, Options{TailLines: AllLines, LimitBytes: 1 << 20}, h); err != nil {
			t.Fatal(err)
		}
		h.check(t)
		if h.bytes != 1<<20 {
			t.Fatalf("got %d bytes, want %d", h.bytes, 1<<20)
		}
	})
}

// TestReadLogsFollowEndlessWriter follows a container that writes one line without end: the client
// gets bytes while it is written, and once the client goes away the reader stops and leaves no
// goroutine behind.
func TestReadLogsFollowEndlessWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	goroutines := runtime.NumGoroutine()
	h := newHeapWatch()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- ReadLogs(ctx, path, Options{Follow: true, TailLines: AllLines, Poll: 10 * time.Millisecond}, h)
	}()

	var stopWriting atomic.Bool
	written := make(chan struct{})
	go func() {
		defer close(written)
		for n := 0; n < hugeLine && !stopWriting.Load(); n += 1 << 20 {
			writePartials(t, f, 1<<20)
		}
	}()
	// The line never ends (no F tag is written), so any delivery at all shows the reader does
	// not wait for its end. Waiting for the delivery, not for the writer, keeps a slow reader
	// from failing when the writer finishes its bound first.
	<-h.first
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	stopWriting.Store(true)
	<-written
	h.check(t)
	waitGoroutines(t, goroutines)
}

// waitGoroutines waits until no more than n goroutines run: a stopped watcher's goroutine ends
// shortly after it is closed.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for i := 0; runtime.NumGoroutine() > n; i++ {
		if i == 1000 {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReadLogsFollowShowsOpenLine: a follower sees a line being written before it ends (a progress
// bar), and the unterminated last words of a container that exited.
func TestReadLogsFollowShowsOpenLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeFile(t, path, at(0)+" stdout F a\n")
	var mu sync.Mutex
	exited := false
	out := &syncBuffer{ch: make(chan struct{}, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- ReadLogs(context.Background(), path, Options{
			Follow: true, TailLines: AllLines, Poll: 10 * time.Millisecond,
			Done: func() bool { mu.Lock(); defer mu.Unlock(); return exited },
		}, out)
	}()
	out.waitFor(t, "a\n")
	appendFile(t, path, at(1)+" stdout P 10%\n")
	out.waitFor(t, "a\n10%")
	appendFile(t, path, at(2)+" stdout P  50%\n")
	out.waitFor(t, "a\n10% 50%")
	mu.Lock()
	exited = true
	mu.Unlock()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "a\n10% 50%")
}
