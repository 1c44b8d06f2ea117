// Package oomwatcher turns the kernel's OOM kills into SystemOOM events on the Node, as the
// kubelet's OOM watcher does. It reads /dev/kmsg from its end, so kills from before the agent
// started are not reported again. A kill inside a container's cgroup is left out: the container's
// status reports it as OOMKilled.
package oomwatcher

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/internal/lazy"
)

// Recorder records the node's events; a record.EventRecorder is one.
type Recorder interface {
	Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Watcher reads kernel OOM kills and records the system's ones on the node.
type Watcher struct {
	// Node names the node in the events (the kubelet's Node reference).
	Node *v1.ObjectReference
	// CgroupRoot is the agent's cgroup root ("/kubepods"): kills in cgroups under it are
	// containers'. "" (placement left to the runtime) counts only the root cgroup's as the system's,
	// as the kubelet does.
	CgroupRoot string
	Recorder   Recorder
	Log        *slog.Logger
	// Path is the kernel log device (default /dev/kmsg).
	Path string

	// seeked, when set, is closed once Run reads only new records (tests wait for it).
	seeked chan struct{}
}

// Kill is one OOM kill as the kernel logged it.
type Kill struct {
	PID    int
	Comm   string
	Memcg  string // the victim's memory cgroup, "" when the kernel did not say
	Global bool   // the whole system ran out, not a cgroup's limit
}

// maxRecord bounds one read: the kernel returns one record per read and refuses a buffer too
// small for it, and its records (prefix, text, dictionary) stay well below this.
const maxRecord = 8192

// Run reports OOM kills until ctx ends; an unreadable kernel log is an error.
func (w *Watcher) Run(ctx context.Context) error {
	p := w.Path
	if p == "" {
		p = "/dev/kmsg"
	}
	log := w.Log
	if log == nil {
		log = slog.Default()
	}
	// Non-blocking, so the runtime's poller serves reads and Close ends a read in progress.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	// /dev/kmsg's SEEK_END skips the records already in the buffer: only new kills are reported.
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return err
	}
	if w.seeked != nil {
		close(w.seeked)
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer func() {
		if stop() {
			f.Close()
		}
	}()
	var p2 parser
	buf := make([]byte, maxRecord)
	for {
		n, err := f.Read(buf)
		switch {
		case errors.Is(err, syscall.EPIPE):
			// The kernel overwrote records before they were read; carry on with the next.
			continue
		case err != nil:
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		w.handle(&p2, buf[:n], log)
	}
}

// handle reads one kernel log record and records a system OOM kill it completes.
func (w *Watcher) handle(p *parser, rec []byte, log *slog.Logger) {
	msg, ok := recordText(rec)
	if !ok {
		return
	}
	k, done := p.line(msg)
	if !done || !w.systemKill(k) {
		return
	}
	log.Warn("system OOM kill", "pid", k.PID, "process", k.Comm, "memcg", k.Memcg)
	if w.Recorder != nil {
		w.Recorder.Eventf(w.Node, v1.EventTypeWarning, "SystemOOM",
			"System OOM encountered, victim process: %s, pid: %d", k.Comm, k.PID)
	}
}

// systemKill tells a kill to report from a container's (whose status already says OOMKilled).
func (w *Watcher) systemKill(k Kill) bool {
	if k.Memcg == "" {
		// Older kernels name no cgroup: only a system-wide OOM is the system's.
		return k.Global
	}
	root := strings.TrimSuffix(w.CgroupRoot, "/")
	if root == "" {
		return k.Memcg == "/"
	}
	if !strings.HasPrefix(root, "/") {
		root = "/" + root
	}
	memcg := path.Clean(k.Memcg)
	return memcg != root && !strings.HasPrefix(memcg, root+"/")
}

// recordText is a /dev/kmsg record's message: "prio,seq,usec,flags[,…];text\n" and then
// dictionary lines starting with a space.
func recordText(rec []byte) (string, bool) {
	s := string(rec)
	i := strings.IndexByte(s, ';')
	if i < 0 {
		return "", false
	}
	s = s[i+1:]
	if j := strings.IndexByte(s, '\n'); j >= 0 {
		s = s[:j]
	}
	return s, true
}

var (
	// oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=stress,pid=1234,uid=0
	oomKillRE = lazy.Value[*regexp.Regexp]{New: func() *regexp.Regexp { return regexp.MustCompile(`^oom-kill:(.*)$`) }}
	// Out of memory: Killed process 1234 (stress) total-vm:…   and   Memory cgroup out of memory: Killed process …
	killedRE = lazy.Value[*regexp.Regexp]{New: func() *regexp.Regexp {
		return regexp.MustCompile(`^(Memory cgroup out of memory|Out of memory)[^:]*: Kill(?:ed)? process (\d+) \(([^)]*)\)`)
	}}
)

// parser pairs the kernel's oom-kill summary line (cgroup, victim) with the "Killed process"
// line that follows it for the same kill.
type parser struct {
	pending *Kill
}

// line reads one kernel message; done is true when it completes a kill.
func (p *parser) line(msg string) (Kill, bool) {
	if m := oomKillRE.Get().FindStringSubmatch(msg); m != nil {
		k := Kill{}
		for _, field := range strings.Split(m[1], ",") {
			key, val, _ := strings.Cut(field, "=")
			switch key {
			case "task_memcg":
				k.Memcg = val
			case "task":
				k.Comm = val
			case "pid":
				k.PID, _ = strconv.Atoi(val)
			case "global_oom":
				k.Global = true
			}
		}
		p.pending = &k
		return Kill{}, false
	}
	m := killedRE.Get().FindStringSubmatch(msg)
	if m == nil {
		return Kill{}, false
	}
	pid, err := strconv.Atoi(m[2])
	if err != nil {
		return Kill{}, false
	}
	k := Kill{PID: pid, Comm: m[3], Global: m[1] == "Out of memory"}
	if p.pending != nil && p.pending.PID == pid {
		k.Memcg = p.pending.Memcg
		k.Global = k.Global || p.pending.Global
	}
	p.pending = nil
	return k, true
}
