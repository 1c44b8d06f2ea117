package logs

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTailMatchesFullRead checks the backward search against reading everything: for random
// interleavings of partial and full lines on both streams, spread over rotated files, the last n
// lines must be the same.
func TestTailMatchesFullRead(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := range 80 {
		dir := t.TempDir()
		path := filepath.Join(dir, "0.log")
		var files [3]strings.Builder
		sec := 0
		open := map[string]bool{}
		for range rng.Intn(300) {
			stream := Stdout
			if rng.Intn(3) == 0 {
				stream = Stderr
			}
			tag := "F"
			if rng.Intn(3) == 0 {
				tag = "P"
			}
			open[stream] = tag == "P"
			// Long lines now and then, so lines cross the search's blocks.
			body := fmt.Sprintf("%s-%d", stream, sec)
			if rng.Intn(20) == 0 {
				body += strings.Repeat("x", rng.Intn(3*tailBlock))
			}
			files[min(sec/100, 2)].WriteString(fmt.Sprintf("%s %s %s %s\n", at(sec), stream, tag, body))
			sec++
		}
		// A line left open at the end is printed without a newline; two such (one per stream)
		// would run together into what reads as one line, so one stream ends its line.
		if open[Stdout] && open[Stderr] {
			files[min(sec/100, 2)].WriteString(fmt.Sprintf("%s %s F end\n", at(sec), Stderr))
			sec++
		}
		os.WriteFile(path+".20261122-010000.000000", []byte(files[0].String()), 0o644)
		os.WriteFile(path+".20261122-010001.000000", []byte(files[1].String()), 0o644)
		os.WriteFile(path, []byte(files[2].String()+at(sec)+" stdout F unterminated"), 0o644)

		var all bytes.Buffer
		if err := ReadLogs(context.Background(), path, Options{TailLines: AllLines}, &all); err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitAfter(all.String(), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		for _, n := range []int{0, 1, 2, 5, 50, 1000} {
			var got bytes.Buffer
			if err := ReadLogs(context.Background(), path, Options{TailLines: int64(n)}, &got); err != nil {
				t.Fatal(err)
			}
			want := strings.Join(lines[max(0, len(lines)-n):], "")
			if got.String() != want {
				t.Fatalf("round %d, tail %d:\ngot  %.300q\nwant %.300q", round, n, got.String(), want)
			}
		}
	}
}

func BenchmarkTail10Of50MiB(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "0.log")
	line := at(0) + " stdout F " + strings.Repeat("y", 100) + "\n"
	big := []byte(strings.Repeat(line, 50<<20/len(line)))
	for i := range 4 {
		os.WriteFile(fmt.Sprintf("%s.20261122-01000%d.000000", path, i), big, 0o644)
	}
	os.WriteFile(path, big[:len(big)/5], 0o644)
	b.ResetTimer()
	for range b.N {
		var out bytes.Buffer
		if err := ReadLogs(context.Background(), path, Options{TailLines: 10}, &out); err != nil {
			b.Fatal(err)
		}
	}
}
