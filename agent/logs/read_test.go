package logs

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

func at(sec int) string { return t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339Nano) }

func writeFile(t *testing.T, path string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseLine(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		wantErr bool
		stream  string
		partial bool
		content string
	}{
		{name: "full", line: at(0) + " stdout F hello world", stream: Stdout, content: "hello world"},
		{name: "partial", line: at(0) + " stderr P hel", stream: Stderr, partial: true, content: "hel"},
		{name: "empty content", line: at(0) + " stdout F", stream: Stdout, content: ""},
		{name: "extra tags", line: at(0) + " stdout F:x spaces  kept ", stream: Stdout, content: "spaces  kept "},
		{name: "bad time", line: "yesterday stdout F x", wantErr: true},
		{name: "bad stream", line: at(0) + " stdin F x", wantErr: true},
		{name: "bad tag", line: at(0) + " stdout X x", wantErr: true},
		{name: "no fields", line: "garbage", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var e entry
			err := parseLine([]byte(tc.line), &e)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if e.stream != tc.stream || e.partial != tc.partial || string(e.content) != tc.content {
				t.Fatalf("got %+v", e)
			}
		})
	}
}

func TestReadLogs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	// Two rotated files (one compressed), then the live one.
	writeFile(t, path+".20261122-010000.000000", at(0)+" stdout F one\n", at(1)+" stderr F two\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(at(2) + " stdout F three\n" + at(3) + " stdout P fo"))
	zw.Close()
	if err := os.WriteFile(path+".20261122-010001.000000.gz", gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path,
		at(4)+" stdout F ur\n",
		"not a log line\n",
		at(5)+" stdout P fi",
		"\n"+at(6)+" stderr F six\n",
		at(7)+" stdout F ve\n",
		at(8)+" stdout F eight\n",
	)
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "all", opts: Options{TailLines: AllLines},
			want: "one\ntwo\nthree\nfour\nsix\nfive\neight\n"},
		{name: "tail 3", opts: Options{TailLines: 3}, want: "six\nfive\neight\n"},
		{name: "tail 0", opts: Options{TailLines: 0}, want: ""},
		{name: "tail more than there is", opts: Options{TailLines: 100},
			want: "one\ntwo\nthree\nfour\nsix\nfive\neight\n"},
		{name: "since", opts: Options{TailLines: AllLines, Since: t0.Add(5 * time.Second)},
			want: "six\nfive\neight\n"},
		{name: "partial line keeps its first time", opts: Options{TailLines: AllLines, Since: t0.Add(5 * time.Second), Timestamps: true},
			want: at(6) + " six\n" + at(5) + " five\n" + at(8) + " eight\n"},
		{name: "stderr only", opts: Options{TailLines: AllLines, Stream: Stderr}, want: "two\nsix\n"},
		{name: "limit bytes", opts: Options{TailLines: AllLines, LimitBytes: 10}, want: "one\ntwo\nth"},
		{name: "tail and limit", opts: Options{TailLines: 2, LimitBytes: 7}, want: "five\nei"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := ReadLogs(context.Background(), path, tc.opts, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Fatalf("got %q\nwant %q", out.String(), tc.want)
			}
		})
	}
}

// A container that exits in the middle of a line leaves a "P" entry with no "F" after it; its
// last words are printed as written, without a newline, and count as a line for --tail.
func TestReadLogsLastLineWithoutNewline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeFile(t, path,
		at(0)+" stdout F one\n",
		at(1)+" stderr F two\n",
		at(2)+" stdout P last ",
		"\n"+at(3)+" stdout P words\n",
	)
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{name: "all", opts: Options{TailLines: AllLines}, want: "one\ntwo\nlast words"},
		{name: "tail 1", opts: Options{TailLines: 1}, want: "last words"},
		{name: "tail 2", opts: Options{TailLines: 2}, want: "two\nlast words"},
		{name: "timestamps", opts: Options{TailLines: 1, Timestamps: true}, want: at(2) + " last words"},
		{name: "other stream", opts: Options{TailLines: AllLines, Stream: Stderr}, want: "two\n"},
		{name: "since after its start", opts: Options{TailLines: AllLines, Since: t0.Add(3 * time.Second)}, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := ReadLogs(context.Background(), path, tc.opts, &out); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Fatalf("got %q\nwant %q", out.String(), tc.want)
			}
		})
	}
}

func TestReadLogsMissing(t *testing.T) {
	err := ReadLogs(context.Background(), filepath.Join(t.TempDir(), "0.log"), Options{TailLines: AllLines}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("want an error for a missing log")
	}
}

// syncBuffer is written by the follower and read by the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.ch <- struct{}{}:
	default:
	}
	return n, err
}

func (b *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	for {
		b.mu.Lock()
		got := b.buf.String()
		b.mu.Unlock()
		if got == want {
			return
		}
		if !strings.HasPrefix(want, got) {
			t.Fatalf("got %q, want %q", got, want)
		}
		<-b.ch
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(s)
	f.Close()
}

func TestReadLogsFollowAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "0.log")
	writeFile(t, path, at(0)+" stdout F a\n", at(1)+" stdout F b\n")
	var done sync.Mutex
	exited := false
	out := &syncBuffer{ch: make(chan struct{}, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- ReadLogs(context.Background(), path, Options{
			Follow: true, TailLines: 1, Poll: 20 * time.Millisecond,
			Done: func() bool { done.Lock(); defer done.Unlock(); return exited },
		}, out)
	}()
	out.waitFor(t, "b\n")
	appendFile(t, path, at(2)+" stdout P c")
	appendFile(t, path, "1\n"+at(3)+" stdout F c2\n")
	out.waitFor(t, "b\nc1c2\n")
	// Rotate: the old file gets one last line after the rename (the runtime had it open), then
	// the runtime reopens a new file at the path.
	if err := os.Rename(path, path+".20261122-010000.000000"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path+".20261122-010000.000000", at(4)+" stdout F d\n")
	appendFile(t, path, at(5)+" stdout F e\n")
	out.waitFor(t, "b\nc1c2\nd\ne\n")
	appendFile(t, path, at(6)+" stdout F last\n")
	done.Lock()
	exited = true
	done.Unlock()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "b\nc1c2\nd\ne\nlast\n")
}

func TestReadLogsFollowStopsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "0.log")
	writeFile(t, path, at(0)+" stdout F a\n")
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{ch: make(chan struct{}, 1)}
	errc := make(chan error, 1)
	go func() { errc <- ReadLogs(ctx, path, Options{Follow: true, TailLines: AllLines}, out) }()
	out.waitFor(t, "a\n")
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
