// Package pleg is the pod lifecycle event generator: it watches what the runtime runs and turns each
// change (a container started, died, was removed) into an event naming the pod, so that pod's worker
// wakes at once instead of waiting for the next periodic sync.
//
// It listens to the runtime's GetContainerEvents stream and relists (ListPodSandbox + ListContainers)
// every second while the stream is unavailable or broken; with a healthy stream it still relists,
// rarely, as a safety net for lost events. Both paths go through one record of states, so an event
// seen on the stream is not reported again by the next relist.
package pleg

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/metrics"
)

// EventType is what changed.
type EventType string

const (
	ContainerStarted EventType = "ContainerStarted"
	ContainerDied    EventType = "ContainerDied"
	ContainerRemoved EventType = "ContainerRemoved"
	ContainerChanged EventType = "ContainerChanged"
)

// PodLifecycleEvent names the pod and the container (or sandbox) that changed.
type PodLifecycleEvent struct {
	ID   types.UID
	Type EventType
	Data string // container or sandbox ID
}

// Defaults.
const (
	RelistPeriod          = time.Second
	RelistPeriodWithEvent = 30 * time.Second
	streamRetry           = 5 * time.Second
	unimplementedRetry    = 5 * time.Minute
	// relistThreshold: Healthy fails when no relist or event succeeded for this long.
	relistThreshold = 3 * time.Minute
)

type state int

const (
	stateNone state = iota
	stateRunning
	stateExited
	stateCreated
	stateUnknown
)

// GenericPLEG is the generator.
type GenericPLEG struct {
	runtime runtimeapi.RuntimeServiceClient
	log     *slog.Logger
	ch      chan *PodLifecycleEvent

	relistPeriod, relistPeriodWithEvents time.Duration

	mu      sync.Mutex
	records map[string]record // container or sandbox ID → last known

	streaming  atomic.Bool
	lastActive atomic.Int64 // unix nanos of the last successful relist or event
	relistNow  chan struct{}
}

type record struct {
	pod   types.UID
	state state
}

// Options tune the periods; zero values mean the defaults.
type Options struct {
	RelistPeriod           time.Duration
	RelistPeriodWithEvents time.Duration
	Log                    *slog.Logger
}

// New makes a generator; Run starts it.
func New(runtime runtimeapi.RuntimeServiceClient, o Options) *GenericPLEG {
	if o.RelistPeriod == 0 {
		o.RelistPeriod = RelistPeriod
	}
	if o.RelistPeriodWithEvents == 0 {
		o.RelistPeriodWithEvents = RelistPeriodWithEvent
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &GenericPLEG{
		runtime: runtime, log: o.Log, ch: make(chan *PodLifecycleEvent, 1000),
		relistPeriod: o.RelistPeriod, relistPeriodWithEvents: o.RelistPeriodWithEvents,
		records: map[string]record{}, relistNow: make(chan struct{}, 1),
	}
}

// Watch is the event channel the SyncLoop selects on.
func (g *GenericPLEG) Watch() <-chan *PodLifecycleEvent { return g.ch }

// Streaming reports whether the runtime's event stream is in use.
func (g *GenericPLEG) Streaming() bool { return g.streaming.Load() }

// Healthy fails when the generator has seen nothing from the runtime for too long.
func (g *GenericPLEG) Healthy() error {
	last := time.Unix(0, g.lastActive.Load())
	if since := time.Since(last); since > relistThreshold {
		return fmt.Errorf("pleg was last active %s ago; threshold is %s", since.Round(time.Second), relistThreshold)
	}
	return nil
}

// Run relists and follows the event stream until ctx ends.
func (g *GenericPLEG) Run(ctx context.Context) {
	g.lastActive.Store(time.Now().UnixNano())
	go g.watchEvents(ctx)
	failing := false
	var lastRelist time.Time
	for {
		// A runtime that is down fails every relist: say so when it starts and when it ends.
		start := time.Now()
		err := g.Relist(ctx)
		if err == nil {
			var interval time.Duration
			if !lastRelist.IsZero() {
				interval = start.Sub(lastRelist)
			}
			metrics.ObservePLEGRelist(time.Since(start), interval, start)
			lastRelist = start
		}
		if err != nil && ctx.Err() == nil {
			if !failing {
				g.log.Warn("pleg relist failed; retrying every "+g.relistPeriod.String(), "err", err)
			}
			failing = true
		} else if failing {
			g.log.Info("pleg relist works again")
			failing = false
		}
		period := g.relistPeriod
		if g.streaming.Load() {
			period = g.relistPeriodWithEvents
		}
		t := time.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-g.relistNow:
			t.Stop()
		case <-t.C:
		}
	}
}

func (g *GenericPLEG) watchEvents(ctx context.Context) {
	told := false
	for ctx.Err() == nil {
		err := g.followStream(ctx)
		if g.streaming.Swap(false) {
			// The stream broke: relist now so nothing that happened meanwhile is missed.
			g.kickRelist()
		}
		retry := streamRetry
		if status.Code(err) == codes.Unimplemented {
			// Runtimes without the stream (containerd 1.6) will not grow one while running: ask rarely.
			retry = unimplementedRetry
			if !told {
				g.log.Info("runtime has no container event stream; relisting every " + g.relistPeriod.String())
				told = true
			}
		} else if ctx.Err() == nil {
			g.log.Info("pleg event stream ended; relisting every "+g.relistPeriod.String()+" until it is back", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retry):
		}
	}
}

func (g *GenericPLEG) kickRelist() {
	select {
	case g.relistNow <- struct{}{}:
	default:
	}
}

func (g *GenericPLEG) followStream(ctx context.Context) error {
	stream, err := g.runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return err
	}
	// The stream counts as healthy only from its first event: until then the runtime may not have
	// subscribed us yet, and whatever happened before it did is seen only by relisting, so relisting
	// stays fast until then, and one more relist follows the first event to catch anything that
	// fell in the gap.
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		if !g.streaming.Swap(true) {
			g.kickRelist()
		}
		g.lastActive.Store(time.Now().UnixNano())
		g.handleEvent(ev)
	}
}

func (g *GenericPLEG) handleEvent(ev *runtimeapi.ContainerEventResponse) {
	var uid types.UID
	var st state
	switch ev.ContainerEventType {
	case runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT:
		st = stateCreated
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		st = stateRunning
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		st = stateExited
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		st = stateNone
	}
	for _, cs := range ev.ContainersStatuses {
		if cs.Id == ev.ContainerId {
			uid = types.UID(cs.Labels[kubecontainer.LabelPodUID])
		}
	}
	if uid == "" && ev.PodSandboxStatus != nil {
		uid = types.UID(ev.PodSandboxStatus.Labels[kubecontainer.LabelPodUID])
	}
	g.mu.Lock()
	if uid == "" {
		uid = g.records[ev.ContainerId].pod
	}
	var out []*PodLifecycleEvent
	if uid != "" {
		out = g.update(ev.ContainerId, uid, st)
	}
	g.mu.Unlock()
	if uid == "" {
		// Not ours, or an object we have not seen yet without labels on the event: let a relist sort it.
		g.kickRelist()
		return
	}
	g.send(out)
}

// update records the new state and returns the events it implies. g.mu is held.
func (g *GenericPLEG) update(id string, uid types.UID, st state) []*PodLifecycleEvent {
	old := g.records[id]
	if st == stateNone {
		delete(g.records, id)
	} else {
		g.records[id] = record{pod: uid, state: st}
	}
	if old.state == st {
		return nil
	}
	switch st {
	case stateRunning:
		return []*PodLifecycleEvent{{ID: uid, Type: ContainerStarted, Data: id}}
	case stateExited:
		return []*PodLifecycleEvent{{ID: uid, Type: ContainerDied, Data: id}}
	case stateNone:
		if old.state == stateRunning {
			return []*PodLifecycleEvent{{ID: uid, Type: ContainerDied, Data: id}, {ID: uid, Type: ContainerRemoved, Data: id}}
		}
		return []*PodLifecycleEvent{{ID: uid, Type: ContainerRemoved, Data: id}}
	}
	return []*PodLifecycleEvent{{ID: uid, Type: ContainerChanged, Data: id}}
}

func (g *GenericPLEG) send(events []*PodLifecycleEvent) {
	for _, e := range events {
		select {
		case g.ch <- e:
		default:
			// A full channel means the SyncLoop is behind; the periodic sync covers a dropped event.
			g.log.Warn("pleg event channel full; dropping event", "pod", e.ID, "type", e.Type)
		}
	}
}

// Relist lists all sandboxes and containers once and reports what changed since the last look.
func (g *GenericPLEG) Relist(ctx context.Context) error {
	sbs, err := g.runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list sandboxes: %w", err)
	}
	cs, err := g.runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	seen := map[string]record{}
	for _, sb := range sbs.Items {
		if uid := types.UID(sb.Labels[kubecontainer.LabelPodUID]); uid != "" {
			st := stateExited
			if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				st = stateRunning
			}
			seen[sb.Id] = record{pod: uid, state: st}
		}
	}
	for _, c := range cs.Containers {
		if uid := types.UID(c.Labels[kubecontainer.LabelPodUID]); uid != "" {
			seen[c.Id] = record{pod: uid, state: fromCRI(c.State)}
		}
	}
	var out []*PodLifecycleEvent
	g.mu.Lock()
	for id, r := range seen {
		out = append(out, g.update(id, r.pod, r.state)...)
	}
	for id, r := range g.records {
		if _, ok := seen[id]; !ok {
			out = append(out, g.update(id, r.pod, stateNone)...)
		}
	}
	g.mu.Unlock()
	g.lastActive.Store(time.Now().UnixNano())
	g.send(out)
	return nil
}

func fromCRI(s runtimeapi.ContainerState) state {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return stateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return stateExited
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return stateCreated
	}
	return stateUnknown
}
