package logs

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/nodelet/nodelet/internal/ctxio"
)

// Options select what ReadLogs writes; they mirror v1.PodLogOptions.
type Options struct {
	// Follow keeps reading as the container writes, across rotations, until ctx ends or Done says so.
	Follow bool
	// TailLines, when >= 0, starts that many lines before the end of what is already written.
	TailLines int64
	// Since, when not zero, skips lines written before it.
	Since time.Time
	// Timestamps prefixes each line with its RFC3339Nano time, as kubectl logs --timestamps.
	Timestamps bool
	// LimitBytes, when > 0, stops after that many bytes of output.
	LimitBytes int64
	// Stream, when Stdout or Stderr, keeps only that stream.
	Stream string
	// Done is asked while following at the end of the file; once it says true (the container has
	// exited) the reader drains what is left and returns. Nil means follow until ctx ends.
	Done func() bool
	// Poll is how often a follower looks again when no file event came (default 1s); events from
	// fsnotify wake it sooner.
	Poll time.Duration
}

// AllLines is TailLines for "no tail".
const AllLines = -1

// errLimit stops reading once LimitBytes are out.
var errLimit = errors.New("log byte limit reached")

// ReadLogs writes the log of the container whose CRI log file is path to w: its rotated files
// (path.<time>[.gz], oldest first) and then path itself.
//
// A line the runtime split into partial ("P") fragments is one line, with the time of its first
// fragment, so tail counts and timestamps refer to what the program printed. Memory stays bounded
// whatever the container wrote (see maxLineBytes), and reading ends as soon as ctx does.
func ReadLogs(ctx context.Context, path string, opts Options, w io.Writer) error {
	if opts.LimitBytes > 0 {
		w = &limitWriter{w: w, left: opts.LimitBytes}
	}
	out := &printer{w: w, opts: opts}
	if opts.TailLines >= 0 {
		out.tail = newRing(int(opts.TailLines))
	}
	err := readAll(ctx, path, opts, out)
	if errors.Is(err, errLimit) || (ctx.Err() != nil && errors.Is(err, ctx.Err())) {
		return nil
	}
	return err
}

func readAll(ctx context.Context, path string, opts Options, out *printer) error {
	rotated, err := RotatedFiles(path)
	if err != nil {
		return err
	}
	files := append(rotated, path)
	first, offset := 0, int64(0)
	if opts.TailLines >= 0 {
		first, offset = tailStart(files, opts.TailLines)
	}
	for i := first; i < len(rotated); i++ {
		off := int64(0)
		if i == first {
			off = offset
		}
		if err := readClosedFile(ctx, rotated[i], off, out); err != nil {
			return err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		if len(rotated) > 0 && errors.Is(err, os.ErrNotExist) && !opts.Follow {
			// Caught between rename and reopen: the rotated files are all there is.
			if err := out.endOpen(); err != nil {
				return err
			}
			return out.flushTail()
		}
		return fmt.Errorf("open container log: %w", err)
	}
	defer func() { f.Close() }()
	if first == len(rotated) && offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return err
		}
	}
	src := newSource(ctx, f)
	if err := src.drain(out); err != nil {
		return err
	}
	if !opts.Follow {
		// No "F" will come for a partial line a container left when it exited (its last words
		// had no newline), nor while we are not waiting for one: it is printed as it is.
		if err := out.endOpen(); err != nil {
			return err
		}
	}
	if err := out.flushTail(); err != nil {
		return err
	}
	if !opts.Follow {
		return nil
	}
	return follow(ctx, path, opts, &f, &src, out)
}

// follow waits at the end of the current file for more lines. When the runtime reopens the log
// after a rotation, the path names a new file: the rest of the old one is read, then the new one.
func follow(ctx context.Context, path string, opts Options, f **os.File, src **source, out *printer) error {
	poll := opts.Poll
	if poll <= 0 {
		poll = time.Second
	}
	wake, stop := watch(filepath.Dir(path))
	defer stop()
	timer := time.NewTimer(poll)
	defer timer.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		done := opts.Done != nil && opts.Done()
		if err := (*src).drain(out); err != nil {
			return err
		}
		if cur, err := os.Stat(path); err == nil {
			old, err := (*f).Stat()
			if err == nil && !os.SameFile(cur, old) {
				nf, err := os.Open(path)
				if err == nil {
					(*f).Close()
					*f, *src = nf, newSource(ctx, nf)
					continue
				}
			}
		}
		// A line still open goes out before waiting (a progress bar), and before the end: the
		// container's last words need no newline.
		if err := out.flushOpen(); err != nil {
			return err
		}
		if done {
			return nil
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-timer.C:
		}
	}
}

func readClosedFile(ctx context.Context, path string, offset int64, out *printer) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed by rotation while we listed
		}
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if offset > 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return err
		}
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	s := newSource(ctx, r)
	if err := s.drain(out); err != nil {
		return err
	}
	// A rotated file ends where the runtime reopened; a last line without newline is still a line.
	return s.flushPending(out)
}

// RotatedFiles lists path's rotated files, oldest first. Rotation names them path.<time> (and
// path.<time>.gz when compressed) with a time that sorts as text.
func RotatedFiles(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, base+".") && !strings.HasSuffix(n, ".tmp") {
			out = append(out, filepath.Join(dir, n))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return strings.TrimSuffix(out[i], ".gz") < strings.TrimSuffix(out[j], ".gz")
	})
	return out, nil
}

// Bounds on what one reader holds, whatever the container writes. A runtime splits a long line into
// partial ("P") entries (conmon at 8 KiB, containerd at 16 KiB), so an entry longer than
// maxEntryBytes comes from a broken or hostile writer: it is cut there and the rest of it dropped.
// A program's line may be endless: streamed out, it goes in pieces of maxLineBytes as it comes;
// kept for --tail, it is cut to maxLineBytes and still counts as one line. Below that size both
// ways print the same whole lines.
const (
	maxEntryBytes = 64 << 10
	maxLineBytes  = 256 << 10
)

// source yields complete lines of one file; a line still being written at EOF waits in pending.
type source struct {
	r       *bufio.Reader
	pending []byte
}

// newSource reads r until ctx ends: a client that goes away stops even a reader that never
// reaches the end of the file, because the writer is faster.
func newSource(ctx context.Context, r io.Reader) *source {
	return &source{r: bufio.NewReaderSize(ctxio.Reader(ctx, r), 64<<10)}
}

func (s *source) drain(out *printer) error {
	for {
		chunk, err := s.r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.keep(chunk)
			continue
		}
		if err != nil {
			s.keep(chunk)
			if err == io.EOF {
				return nil
			}
			return err
		}
		line := chunk[:len(chunk)-1]
		if len(s.pending) > 0 {
			s.keep(line)
			line = s.pending
		}
		perr := out.line(line)
		s.pending = s.pending[:0]
		if perr != nil {
			return perr
		}
	}
}

// keep adds to the pending entry up to maxEntryBytes and drops the rest.
func (s *source) keep(b []byte) {
	room := maxEntryBytes - len(s.pending)
	s.pending = append(s.pending, b[:min(len(b), max(room, 0))]...)
}

func (s *source) flushPending(out *printer) error {
	if len(s.pending) == 0 {
		return nil
	}
	err := out.line(s.pending)
	s.pending = s.pending[:0]
	return err
}

// openLine is a stream's line whose partial fragments are still coming.
type openLine struct {
	ts      time.Time // of its first fragment
	buf     []byte    // what is not written yet
	on      bool
	skip    bool // filtered out (by stream or time, decided on its first fragment)
	started bool // its beginning has been written
}

// printer joins partial fragments into lines, filters them and writes them (or keeps the last
// TailLines of them until flushTail). A line is written whole when it is short, so lines of stdout
// and stderr do not mix; a long one goes out in pieces as it comes, as the kubelet does.
type printer struct {
	w       io.Writer
	opts    Options
	tail    *ring
	open    [2]openLine
	scratch []byte
}

func (p *printer) line(raw []byte) error {
	var e entry
	if err := parseLine(raw, &e); err != nil {
		slog.Debug("skipping malformed container log line", "err", err)
		return nil
	}
	ol := &p.open[0]
	if e.stream == Stderr {
		ol = &p.open[1]
	}
	if !ol.on {
		*ol = openLine{ts: e.ts, buf: ol.buf[:0], on: true, skip: !p.keep(e.stream, e.ts)}
	}
	if !e.partial {
		ol.on = false
	}
	if ol.skip {
		return nil
	}
	if p.tail != nil {
		ol.buf = append(ol.buf, e.content[:min(len(e.content), max(maxLineBytes-len(ol.buf), 0))]...)
		if !e.partial {
			p.tail.add(p.format(ol, true))
			ol.buf = ol.buf[:0]
		}
		return nil
	}
	ol.buf = append(ol.buf, e.content...)
	if e.partial && len(ol.buf) < maxLineBytes {
		return nil
	}
	return p.write(ol, !e.partial)
}

func (p *printer) keep(stream string, ts time.Time) bool {
	if p.opts.Stream != "" && p.opts.Stream != stream {
		return false
	}
	return p.opts.Since.IsZero() || !ts.Before(p.opts.Since)
}

// format renders what ol holds, with the time first if asked and the line has not begun yet.
func (p *printer) format(ol *openLine, end bool) []byte {
	p.scratch = p.scratch[:0]
	if p.opts.Timestamps && !ol.started {
		p.scratch = ol.ts.UTC().AppendFormat(p.scratch, time.RFC3339Nano)
		p.scratch = append(p.scratch, ' ')
	}
	p.scratch = append(p.scratch, ol.buf...)
	if end {
		p.scratch = append(p.scratch, '\n')
	}
	return p.scratch
}

func (p *printer) write(ol *openLine, end bool) error {
	b := p.format(ol, end)
	ol.started, ol.buf = true, ol.buf[:0]
	_, err := p.w.Write(b)
	return err
}

// flushOpen writes what partial lines hold, so a follower sees a line being written (a progress
// bar) before it ends.
func (p *printer) flushOpen() error {
	if p.tail != nil {
		return nil
	}
	for i := range p.open {
		ol := &p.open[i]
		if ol.on && !ol.skip && len(ol.buf) > 0 {
			if err := p.write(ol, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// endOpen ends the lines still open without adding a newline the program did not write; for
// --tail each counts as a line.
func (p *printer) endOpen() error {
	for i := range p.open {
		ol := &p.open[i]
		if !ol.on {
			continue
		}
		ol.on = false
		if ol.skip || len(ol.buf) == 0 {
			continue
		}
		if p.tail != nil {
			p.tail.add(p.format(ol, false))
			ol.buf = ol.buf[:0]
			continue
		}
		if err := p.write(ol, false); err != nil {
			return err
		}
	}
	return nil
}

func (p *printer) flushTail() error {
	if p.tail == nil {
		return nil
	}
	r := p.tail
	p.tail = nil
	for _, l := range r.lines() {
		if _, err := p.w.Write(l); err != nil {
			return err
		}
	}
	return nil
}

// ring keeps the last n formatted lines.
type ring struct {
	buf   [][]byte
	next  int
	full  bool
	limit int
}

func newRing(n int) *ring { return &ring{buf: make([][]byte, 0, min(n, 1024)), limit: n} }

func (r *ring) add(l []byte) {
	if r.limit == 0 {
		return
	}
	if len(r.buf) < r.limit {
		r.buf = append(r.buf, append([]byte(nil), l...))
		return
	}
	r.buf[r.next] = append(r.buf[r.next][:0], l...)
	r.next = (r.next + 1) % r.limit
	r.full = true
}

func (r *ring) lines() [][]byte {
	if !r.full {
		return r.buf
	}
	return append(append([][]byte{}, r.buf[r.next:]...), r.buf[:r.next]...)
}

type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.left <= 0 {
		return 0, errLimit
	}
	cut := int64(len(p)) > l.left
	if cut {
		p = p[:l.left]
	}
	n, err := l.w.Write(p)
	l.left -= int64(n)
	if err == nil && (cut || l.left <= 0) {
		err = errLimit
	}
	return n, err
}
