package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// healthz checks the SyncLoop heartbeat and the runtime's RuntimeReady condition. /healthz/ping
// only says the server answers; /healthz/syncloop and /healthz/runtime check one part.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	checks := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"ping", func(context.Context) error { return nil }},
		{"syncloop", func(context.Context) error {
			if s.d.SyncLoopHealthy == nil {
				return nil
			}
			return s.d.SyncLoopHealthy()
		}},
		{"runtime", s.runtimeHealthy},
	}
	only := r.PathValue("check")
	verbose := r.URL.Query().Has("verbose")
	var b strings.Builder
	failed := false
	found := only == ""
	for _, c := range checks {
		if only != "" && c.name != only {
			continue
		}
		found = true
		if err := c.fn(r.Context()); err != nil {
			failed = true
			fmt.Fprintf(&b, "[-]%s failed: %v\n", c.name, err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", c.name)
		}
	}
	if !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if failed {
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "%shealthz check failed\n", b.String())
		return
	}
	if verbose {
		fmt.Fprintf(w, "%shealthz check passed\n", b.String())
		return
	}
	fmt.Fprint(w, "ok")
}

// ServeHealthz serves /healthz alone on host:port until ctx ends: "ok", or what healthy reports
// with a 500. It is the kubelet's healthzPort, plain HTTP without credentials for the machine's
// own liveness checks, apart from the API so that it answers even where the API is not served.
func ServeHealthz(ctx context.Context, host string, port int32, healthy func() error) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if err := healthy(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: net.JoinHostPort(host, strconv.Itoa(int(port))), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("healthz: %w", err)
	}
	return nil
}

func (s *Server) runtimeHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := s.d.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("runtime status: %w", err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if c.GetType() == runtimeapi.RuntimeReady {
			if !c.GetStatus() {
				return fmt.Errorf("runtime not ready: %s %s", c.GetReason(), c.GetMessage())
			}
			return nil
		}
	}
	return fmt.Errorf("runtime reports no %s condition", runtimeapi.RuntimeReady)
}

// summary is /stats/summary; only_cpu_and_memory=true trims it as metrics-server asks.
func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	sum, err := s.d.Summary(r.Context())
	if err != nil {
		http.Error(w, fmt.Sprintf("stats summary: %v", err), http.StatusInternalServerError)
		return
	}
	if isTrue(r.URL.Query().Get("only_cpu_and_memory")) {
		sum = cpuAndMemoryOnly(sum)
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(sum)
}

func cpuAndMemoryOnly(s *statsapi.Summary) *statsapi.Summary {
	out := &statsapi.Summary{Node: statsapi.NodeStats{
		NodeName: s.Node.NodeName, StartTime: s.Node.StartTime, CPU: s.Node.CPU, Memory: s.Node.Memory,
	}}
	for _, p := range s.Pods {
		q := statsapi.PodStats{PodRef: p.PodRef, StartTime: p.StartTime, CPU: p.CPU, Memory: p.Memory}
		for _, c := range p.Containers {
			q.Containers = append(q.Containers, statsapi.ContainerStats{Name: c.Name, StartTime: c.StartTime, CPU: c.CPU, Memory: c.Memory})
		}
		out.Pods = append(out.Pods, q)
	}
	return out
}
