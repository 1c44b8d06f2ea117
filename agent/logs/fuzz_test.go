package logs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseLine: any line either parses into a stream of stdout or stderr whose content is the
// end of the line, or is refused with errBadLine; it never panics.
func FuzzParseLine(f *testing.F) {
	f.Add([]byte(at(0) + " stdout F hello world"))
	f.Add([]byte(at(0) + " stderr P part"))
	f.Add([]byte(at(0) + " stdout F"))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, line []byte) {
		var e entry
		if err := parseLine(line, &e); err != nil {
			return
		}
		if e.stream != Stdout && e.stream != Stderr {
			t.Fatalf("stream %q", e.stream)
		}
		if !bytes.HasSuffix(line, e.content) {
			t.Fatalf("content %q is not the end of %q", e.content, line)
		}
	})
}

// FuzzReadLogs reads any file as a container log, whole and with a tail: it never panics, a tail
// of n writes at most n lines, and no line passes the bounds the reader keeps.
func FuzzReadLogs(f *testing.F) {
	f.Add([]byte(at(0)+" stdout P a\n"+at(1)+" stderr F b\n"+at(2)+" stdout F c\n"), uint8(1))
	f.Add([]byte(at(0)+" stdout F one\nnot a line\n"+at(1)+" stdout P unterminated"), uint8(0))
	f.Fuzz(func(t *testing.T, data []byte, tail uint8) {
		path := filepath.Join(t.TempDir(), "0.log")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var all bytes.Buffer
		if err := ReadLogs(context.Background(), path, Options{TailLines: AllLines}, &all); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := ReadLogs(context.Background(), path, Options{TailLines: int64(tail)}, &got); err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(got.Bytes(), []byte("\n")); n > int(tail) {
			t.Fatalf("tail %d wrote %d lines", tail, n)
		}
		for _, l := range bytes.Split(got.Bytes(), []byte("\n")) {
			if len(l) > maxLineBytes {
				t.Fatalf("a tail line of %d bytes", len(l))
			}
		}
	})
}
