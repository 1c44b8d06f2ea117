package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nodelet/nodelet/agent/metrics"
)

// part is one thing Run starts beside the SyncLoop.
type part struct {
	name string
	run  func(context.Context) error
}

// loop adapts a part that runs until ctx ends and has no error to report.
func loop(run func(context.Context)) func(context.Context) error {
	return func(ctx context.Context) error { run(ctx); return nil }
}

// Run starts every part and runs until ctx ends or the agent's API fails; it returns once all
// parts have stopped. An Agent runs once.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer a.conn.Close()
	var wg sync.WaitGroup
	for _, p := range a.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.run(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("agent part stopped", "part", p.name, "err", err)
			}
		}()
	}
	var apiErr error
	if a.api != nil {
		// The API is how people and the apiserver reach the node: when it fails, the agent stops.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.api.run(ctx); err != nil && ctx.Err() == nil {
				apiErr = fmt.Errorf("agent API: %w", err)
			}
			cancel()
		}()
	}
	metrics.SetNodeName(a.cfg.NodeName)
	a.log.Info("agent started", "node", a.cfg.NodeName, "runtime", a.cfg.Kubelet.ContainerRuntimeEndpoint, "sources", a.state.Sources())
	a.loop.Run(ctx)
	cancel()
	wg.Wait()
	return apiErr
}

// Healthz reports whether the SyncLoop and PLEG are alive.
func (a *Agent) Healthz() error {
	return errors.Join(a.loop.Healthy(), a.pleg.Healthy())
}

// HealthzHandler serves /healthz.
func (a *Agent) HealthzHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Healthz(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte("ok"))
	})
}

func (a *Agent) serveHealthz(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/healthz", a.HealthzHandler())
	srv := &http.Server{Addr: net.JoinHostPort(a.cfg.Kubelet.HealthzBindAddress, strconv.Itoa(int(*a.cfg.Kubelet.HealthzPort))), Handler: mux,
		ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("healthz: %w", err)
	}
	return nil
}
