package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/nodestatus"
	"github.com/nodelet/nodelet/agent/podstate"
	"github.com/nodelet/nodelet/agent/recorder"
)

// part is one thing Run starts beside the SyncLoop.
type part struct {
	name string
	run  func(context.Context) error
}

// vital has a part's error stop the agent, where the kubelet would not have started.
func vital(run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := run(ctx); err != nil {
			return vitalError{err}
		}
		return nil
	}
}

type vitalError struct{ error }

func (e vitalError) Unwrap() error { return e.error }

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
	var vitalMu sync.Mutex
	var vitalErr error
	for _, p := range a.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.run(ctx); err != nil && ctx.Err() == nil {
				a.log.Error("agent part stopped", "part", p.name, "err", err)
				if errors.As(err, new(vitalError)) {
					vitalMu.Lock()
					vitalErr = fmt.Errorf("%s: %w", p.name, err)
					vitalMu.Unlock()
					cancel()
				}
			}
		}()
	}
	var apiErr error
	if a.api != nil {
		// The API is how people and the apiserver reach the node: when it fails, the agent stops.
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.api.Run(ctx); err != nil && ctx.Err() == nil {
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
	return errors.Join(apiErr, vitalErr)
}

// Healthz reports whether the SyncLoop and PLEG are alive.
func (a *Agent) Healthz() error { return errors.Join(a.loop.Healthy(), a.pleg.Healthy()) }

// PodState is the pods as the agent's API shows them (each desired pod with its kept status).
func (a *Agent) PodState() *podstate.View { return a.state }

// Events are the events recorded about the pods and the node, kept for `nodelet describe`.
func (a *Agent) Events() *recorder.History { return a.events }

// node is the Node the API shows: as nodestatus keeps it, with the events recorded about it.
type node struct {
	*nodestatus.Manager
	*recorder.History
}
