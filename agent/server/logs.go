package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/logs"
)

// logOptions parses the query of /containerLogs, as v1.PodLogOptions spells it.
func logOptions(q url.Values, now time.Time) (logs.Options, bool, error) {
	o := logs.Options{TailLines: logs.AllLines, Follow: isTrue(q.Get("follow")), Timestamps: isTrue(q.Get("timestamps"))}
	previous := isTrue(q.Get("previous"))
	num := func(key string) (int64, bool, error) {
		v := q.Get(key)
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s=%q: not an integer", key, v)
		}
		return n, true, nil
	}
	if n, ok, err := num("tailLines"); err != nil {
		return o, false, err
	} else if ok {
		if n < 0 {
			return o, false, fmt.Errorf("tailLines must be >= 0")
		}
		o.TailLines = n
	}
	if n, ok, err := num("limitBytes"); err != nil {
		return o, false, err
	} else if ok {
		if n < 1 {
			return o, false, fmt.Errorf("limitBytes must be >= 1")
		}
		o.LimitBytes = n
	}
	secs, hasSecs, err := num("sinceSeconds")
	if err != nil {
		return o, false, err
	}
	if hasSecs {
		if secs < 1 {
			return o, false, fmt.Errorf("sinceSeconds must be >= 1")
		}
		o.Since = now.Add(-time.Duration(secs) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		if hasSecs {
			return o, false, fmt.Errorf("at most one of sinceTime or sinceSeconds may be given")
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, false, fmt.Errorf("sinceTime=%q: %v", v, err)
		}
		o.Since = t
	}
	switch s := q.Get("stream"); s {
	case "", "All":
	case "Stdout":
		o.Stream = logs.Stdout
	case "Stderr":
		o.Stream = logs.Stderr
	default:
		return o, false, fmt.Errorf("stream=%q: want Stdout, Stderr or All", s)
	}
	return o, previous, nil
}

func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	opts, previous, err := logOptions(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, err := s.lookupPod(r)
	if err != nil {
		fail(w, err)
		return
	}
	id, err := s.logContainer(ctx, pod, r.PathValue("container"), previous)
	if err != nil {
		fail(w, err)
		return
	}
	st, err := s.d.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		fail(w, fmt.Errorf("container status: %w", err))
		return
	}
	path := st.GetStatus().GetLogPath()
	if path == "" {
		http.Error(w, fmt.Sprintf("container %q in pod %q has no log", r.PathValue("container"), pod.Name), http.StatusBadRequest)
		return
	}
	if opts.Follow {
		// Following ends when the container does, as with the kubelet.
		opts.Done = func() bool {
			st, err := s.d.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
			return err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	// The body is streamed (chunked, each write flushed), never buffered into one answer with a
	// Content-Length: the apiserver relays it to `kubectl logs` over a WebSocket as it comes, and
	// a follower must see lines live.
	out := &flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		out.f = f
	}
	if err := logs.ReadLogs(ctx, path, opts, out); err != nil {
		if !out.wrote {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		// Mid-stream the status is sent; the client sees the body end.
	}
}

// logContainer returns the CRI ID of the container instance whose log is asked for. The previous
// instance is the one status reports as lastState: the attempt before the newest, except while the
// container waits to be restarted (CrashLoopBackOff), when the newest attempt has exited and no
// new one exists yet — then it is the newest. Container GC keeps only the newest dead attempt, so
// looking before it would find nothing.
func (s *Server) logContainer(ctx context.Context, pod *v1.Pod, name string, previous bool) (string, error) {
	if !previous || !waitingToRestart(pod, name) {
		return s.findContainer(ctx, pod, name, previous)
	}
	newest, err := s.findContainer(ctx, pod, name, false)
	if err != nil {
		return s.findContainer(ctx, pod, name, true) // its own error for "no previous"
	}
	st, err := s.d.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: newest})
	if err != nil {
		return "", fmt.Errorf("container status: %w", err)
	}
	if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
		return newest, nil
	}
	// The status lags a restart that has begun: the newest is the current instance.
	return s.findContainer(ctx, pod, name, true)
}

// waitingToRestart reports whether the pod's status shows the container waiting for its next
// attempt.
func waitingToRestart(pod *v1.Pod, name string) bool {
	for _, list := range [][]v1.ContainerStatus{pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, st := range list {
			if st.Name == name {
				return st.State.Waiting != nil
			}
		}
	}
	return false
}

// flushWriter sends each write at once.
type flushWriter struct {
	w     http.ResponseWriter
	f     http.Flusher
	wrote bool
}

func (fw *flushWriter) Write(p []byte) (int, error) {
	fw.wrote = true
	n, err := fw.w.Write(p)
	if fw.f != nil {
		fw.f.Flush()
	}
	return n, err
}
