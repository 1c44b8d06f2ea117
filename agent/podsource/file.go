package podsource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"

	"github.com/nodelet/nodelet/agent/manifest"
)

// ManifestDirSource reads static pods from a folder (or one file): every regular file not starting with a dot,
// each holding one or more Pod manifests (and RuntimeClasses, ConfigMaps, Secrets) in at most
// manifest.MaxSize bytes. It re-reads on every fsnotify event and every Period as a safety net; a file that is not a bounded regular file, or does not parse
// or validate, is logged and skipped, the others go on.
type ManifestDirSource struct {
	Path     string
	NodeName string
	Period   time.Duration // default 20s, the kubelet's fileCheckFrequency
	Set      func(source string, pods []*v1.Pod)
	Log      *slog.Logger
	// Errors, when set, receives the error of each bad file (tests and events read it).
	Errors func(file string, err error)
	// RuntimeClasses, set on a standalone agent, receives the folder's RuntimeClass objects at every
	// read, and the folder's pods are admitted against them as the API server's RuntimeClass plugin
	// admits created pods (manifest.RuntimeClasses.Admit). Unset (in a cluster, whose RuntimeClasses
	// are the apiserver's and whose kubelet admits static pods unchanged), a file holding one is refused.
	RuntimeClasses *RuntimeClassSet

	reported map[string]string // file → error last logged, so a bad file is reported once per change
	// decoded holds each good file's bytes and what they decoded to: a re-read compares the bytes
	// and copies the objects instead of parsing 50 unchanged manifests every Period.
	decoded map[string]decodedFile
}

type decodedFile struct {
	data []byte
	pods []*v1.Pod
	rcs  []*nodev1.RuntimeClass
}

// Run watches until ctx ends.
func (s *ManifestDirSource) Run(ctx context.Context) error {
	if s.Period == 0 {
		s.Period = 20 * time.Second
	}
	if s.Log == nil {
		s.Log = slog.Default()
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("manifest watcher: %w", err)
	}
	defer w.Close()
	watching := false
	watch := func() {
		if watching {
			return
		}
		if err := w.Add(s.Path); err == nil {
			watching = true
		} else if !os.IsNotExist(err) {
			s.Log.Warn("watch manifest path", "path", s.Path, "err", err)
		}
	}
	watch()
	pods, ok := s.readUnlessDone(ctx)
	if !ok {
		return nil
	}
	s.Set(FileSource, pods)
	t := time.NewTicker(s.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if ev.Name == s.Path && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0 {
				watching = false
			}
		case err := <-w.Errors:
			s.Log.Warn("manifest watcher", "err", err)
		case <-t.C:
			watch()
		}
		// Editors write through temporary files and renames; gather a burst into one read.
		drain(w.Events, 10*time.Millisecond)
		pods, ok := s.readUnlessDone(ctx)
		if !ok {
			return nil
		}
		s.Set(FileSource, pods)
	}
}

// readUnlessDone reads the manifests but gives up waiting when ctx ends, so decoding a large
// manifest never delays shutdown; a read left behind only finishes its work and is dropped.
func (s *ManifestDirSource) readUnlessDone(ctx context.Context) ([]*v1.Pod, bool) {
	done := make(chan []*v1.Pod, 1)
	go func() { done <- s.read() }()
	select {
	case pods := <-done:
		return pods, true
	case <-ctx.Done():
		return nil, false
	}
}

func drain(ch <-chan fsnotify.Event, quiet time.Duration) {
	for {
		select {
		case <-ch:
		case <-time.After(quiet):
			return
		}
	}
}

func (s *ManifestDirSource) read() []*v1.Pod {
	fi, err := os.Stat(s.Path)
	if err != nil {
		if !os.IsNotExist(err) {
			s.Log.Warn("read manifest path", "path", s.Path, "err", err)
		}
		return nil
	}
	var files []string
	if fi.IsDir() {
		entries, err := os.ReadDir(s.Path)
		if err != nil {
			s.Log.Warn("read manifest dir", "path", s.Path, "err", err)
			return nil
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
				continue
			}
			f := filepath.Join(s.Path, e.Name())
			// A symlink to a directory is skipped like a directory; to anything else, it is
			// followed and manifest.Read judges the target.
			if fi, err := os.Stat(f); err == nil && fi.IsDir() {
				continue
			}
			files = append(files, f)
		}
	} else {
		files = []string{s.Path}
	}
	sort.Strings(files)

	type decoded struct {
		path string
		pods []*v1.Pod
	}
	var good []decoded
	bad := map[string]error{}
	prev := s.decoded
	s.decoded = map[string]decodedFile{}
	rcs := manifest.RuntimeClasses{}
	definedIn := map[string]string{} // RuntimeClass name → the file defining it
	for _, f := range files {
		ps, rs, err := s.decodeFile(f, definedIn, prev)
		if err != nil {
			bad[f] = err
			continue
		}
		for _, rc := range rs {
			rcs[rc.Name], definedIn[rc.Name] = rc, f
		}
		good = append(good, decoded{f, ps})
	}
	var admit func(*v1.Pod) error
	if s.RuntimeClasses != nil {
		// Stored before the pods are handed on, so a handler lookup for one of them finds the
		// RuntimeClass it was admitted with.
		s.RuntimeClasses.store(rcs)
		admit = rcs.Admit
	}
	var pods []*v1.Pod
	for _, d := range good {
		if err := manifest.DefaultAll(d.pods, FileSource, d.path, s.NodeName, admit); err != nil {
			bad[d.path] = err
			continue
		}
		pods = append(pods, d.pods...)
	}

	reported := map[string]string{}
	for _, f := range files {
		err, ok := bad[f]
		if !ok {
			continue
		}
		reported[f] = err.Error()
		if s.reported[f] != err.Error() {
			s.Log.Error("skipping bad manifest", "file", f, "err", err)
			if s.Errors != nil {
				s.Errors(f, err)
			}
		}
	}
	s.reported = reported
	return pods
}

// decodeFile reads and decodes one file of the folder. Its RuntimeClasses are refused when the agent
// does not honour them (in a cluster), or when one of them is defined by an earlier file too: the
// later definition is refused aloud rather than one of the two silently winning.
func (s *ManifestDirSource) decodeFile(f string, definedIn map[string]string, prev map[string]decodedFile) ([]*v1.Pod, []*nodev1.RuntimeClass, error) {
	data, err := manifest.Read(f)
	if err != nil {
		return nil, nil, err
	}
	d, ok := prev[f]
	if !ok || !bytes.Equal(d.data, data) {
		d.data = data
		if d.pods, d.rcs, err = decodeAll(data); err != nil {
			return nil, nil, err
		}
	}
	s.decoded[f] = d
	// Copies: the pods are defaulted and handed on, the cached objects stay as decoded.
	pods := make([]*v1.Pod, len(d.pods))
	for i, p := range d.pods {
		pods[i] = p.DeepCopy()
	}
	rcs := make([]*nodev1.RuntimeClass, len(d.rcs))
	for i, rc := range d.rcs {
		rcs[i] = rc.DeepCopy()
	}
	seen := map[string]bool{}
	for _, rc := range rcs {
		switch {
		case s.RuntimeClasses == nil:
			return nil, nil, fmt.Errorf("RuntimeClass %q: %w", rc.Name, manifest.ErrRuntimeClassOutsideFolder)
		case definedIn[rc.Name] != "":
			return nil, nil, fmt.Errorf("RuntimeClass %q: %w in %s", rc.Name, ErrDuplicateRuntimeClass, definedIn[rc.Name])
		case seen[rc.Name]:
			return nil, nil, fmt.Errorf("RuntimeClass %q: %w in this file", rc.Name, ErrDuplicateRuntimeClass)
		}
		seen[rc.Name] = true
	}
	return pods, rcs, nil
}

// decodeAll is manifest.DecodeAll; a test counts the files parsed.
var decodeAll = manifest.DecodeAll

// ErrDuplicateRuntimeClass: a RuntimeClass name the manifest folder defines twice.
var ErrDuplicateRuntimeClass = errors.New("already defined")
