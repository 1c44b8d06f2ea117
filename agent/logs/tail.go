package logs

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
)

// tailBlock is how much of a file a backward search reads at a time.
const tailBlock = 32 << 10

// tailSearch finds where forward reading must begin to see the last n lines of a container's
// log, so `logs --tail` reads a few blocks instead of every rotated file. The start is just after
// a full ("F") line, and only where no stream has a partial line open: with stdout and stderr
// interleaved, a stdout "P" fragment may sit before a stderr "F" line, and starting between the
// fragment and its end would print half a line.
type tailSearch struct {
	need      int64 // full lines still to pass
	candidate int64 // offset of a start that needs checking; -1 for none
	candFile  int   // the file the candidate is in
	file      int   // the file being searched
	stream    string
	other     string // the stream whose nearest earlier line decides the candidate
	checked   int    // lines looked at while checking the candidate
	e         entry
}

// maxCheck bounds the look back for the other stream. The runtime writes a split line's
// fragments back to back, so a fragment this far before the candidate has long been ended; and a
// container that never writes to stderr must not make `--tail` read every file.
const maxCheck = 4096

// visit looks at one line (going backwards) that ends with the newline at end; it reports true
// when the search is over, with the start at s.candidate.
func (s *tailSearch) visit(line []byte, end int64) bool {
	if parseLine(line, &s.e) != nil {
		return false
	}
	if s.candidate >= 0 {
		if s.checked++; s.checked > maxCheck {
			return true
		}
		if s.e.stream != s.other {
			return false
		}
		if !s.e.partial {
			return true
		}
		// The other stream has a line open across the candidate: look for an earlier start.
		s.candidate, s.need = -1, 1
	}
	if s.e.partial {
		return false
	}
	if s.need--; s.need > 0 {
		return false
	}
	s.candidate, s.candFile, s.stream, s.checked = end+1, s.file, s.e.stream, 0
	s.other = Stdout
	if s.stream == Stdout {
		s.other = Stderr
	}
	return false
}

// tailStart returns the index into files (oldest first, the live file last) and the offset in it
// where reading must begin to see the last n lines. A partial line may continue across a
// rotation, so the check of a candidate goes on into older files.
func tailStart(files []string, n int64) (int, int64) {
	s := &tailSearch{need: n + 1, candidate: -1}
	for i := len(files) - 1; i >= 0; i-- {
		if strings.HasSuffix(files[i], ".gz") {
			// Compressed files (rotated by an upstream kubelet) cannot be read backwards.
			return 0, 0
		}
		s.file = i
		done, err := eachLineBackward(files[i], s.visit)
		if err != nil {
			return 0, 0 // read everything rather than guess
		}
		if done {
			return s.candFile, s.candidate
		}
	}
	if s.candidate >= 0 {
		// The other stream never wrote before the candidate.
		return s.candFile, s.candidate
	}
	return 0, 0
}

// eachLineBackward calls fn for each newline-terminated line of path, last first, with the offset
// of its newline, until fn says stop. A line longer than maxEntryBytes is given cut to its first
// maxEntryBytes (which hold the time, stream and tag), so an endless line costs time, not memory. The unterminated end of the file (a line being written) is
// not a line yet.
func eachLineBackward(path string, fn func(line []byte, end int64) bool) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	pos := fi.Size()
	lineEnd := int64(-1) // the newline ending the line being assembled; -1 before the first
	var carry []byte     // the part of that line already read, right of pos
	buf := make([]byte, tailBlock)
	for pos > 0 {
		start := max(0, pos-tailBlock)
		b := buf[:pos-start]
		if _, err := f.ReadAt(b, start); err != nil && err != io.EOF {
			return false, err
		}
		j := len(b)
		for {
			i := bytes.LastIndexByte(b[:j], '\n')
			if i < 0 {
				break
			}
			if lineEnd >= 0 {
				line := b[i+1 : j]
				if len(carry) > 0 {
					line = append(append([]byte{}, line...), carry...)
				}
				if fn(line, lineEnd) {
					return true, nil
				}
			}
			lineEnd, carry, j = start+int64(i), nil, i
		}
		if lineEnd >= 0 {
			carry = prependBounded(carry, b[:j])
		}
		pos = start
	}
	if lineEnd >= 0 && fn(carry, lineEnd) {
		return true, nil
	}
	return false, nil
}

// prependBounded returns left+carry cut to its first maxEntryBytes: going backwards, the start of a
// line is what arrives last and the only part worth keeping.
func prependBounded(carry, left []byte) []byte {
	if len(left) >= maxEntryBytes {
		return append(carry[:0], left[:maxEntryBytes]...)
	}
	keep := min(len(carry), maxEntryBytes-len(left))
	out := make([]byte, 0, len(left)+keep)
	return append(append(out, left...), carry[:keep]...)
}
