package engine

import (
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Buffer sizes: the queue decouples the changes that publish events from building their payloads;
// each subscriber's channel absorbs a burst. A subscriber that falls a whole buffer behind is cut
// off (its stream ends with ResourceExhausted) rather than slowing anyone: the kubelet then relists
// and resubscribes.
const (
	eventQueueLen      = 4096
	eventSubscriberLen = 1024
)

type pendingEvent struct {
	id        string
	sandboxID string
	typ       runtimeapi.ContainerEventType
	at        int64
}

type broadcaster struct {
	s     *Engine
	queue chan pendingEvent
	done  chan struct{}

	mu   sync.Mutex
	subs map[chan *runtimeapi.ContainerEventResponse]struct{}
}

func newBroadcaster(s *Engine) *broadcaster {
	b := &broadcaster{
		s:     s,
		queue: make(chan pendingEvent, eventQueueLen),
		done:  make(chan struct{}),
		subs:  map[chan *runtimeapi.ContainerEventResponse]struct{}{},
	}
	go b.run()
	return b
}

// publish never blocks: with the queue full (no one draining for thousands of events) the event
// is dropped and the subscribers, who would miss it, are cut off.
func (b *broadcaster) publish(id, sandboxID string, typ runtimeapi.ContainerEventType) {
	if b == nil {
		return
	}
	b.mu.Lock()
	n := len(b.subs)
	b.mu.Unlock()
	if n == 0 {
		return
	}
	select {
	case b.queue <- pendingEvent{id: id, sandboxID: sandboxID, typ: typ, at: time.Now().UnixNano()}:
	default:
		b.dropAll()
	}
}

func (b *broadcaster) run() {
	for {
		select {
		case <-b.done:
			return
		case ev := <-b.queue:
			resp := b.s.eventPayload(ev)
			b.mu.Lock()
			for ch := range b.subs {
				select {
				case ch <- resp:
				default:
					delete(b.subs, ch)
					close(ch)
				}
			}
			b.mu.Unlock()
		}
	}
}

func (b *broadcaster) subscribe() chan *runtimeapi.ContainerEventResponse {
	ch := make(chan *runtimeapi.ContainerEventResponse, eventSubscriberLen)
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.done:
		close(ch)
	default:
		b.subs[ch] = struct{}{}
	}
	return ch
}

func (b *broadcaster) unsubscribe(ch chan *runtimeapi.ContainerEventResponse) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.subs[ch]; ok {
		delete(b.subs, ch)
		close(ch)
	}
}

func (b *broadcaster) dropAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		delete(b.subs, ch)
		close(ch)
	}
}

func (b *broadcaster) close() {
	b.mu.Lock()
	select {
	case <-b.done:
	default:
		close(b.done)
	}
	b.mu.Unlock()
	b.dropAll()
}

// eventPayload carries, as the kubelet's evented PLEG expects, the pod's status and the status of
// every container in it, as they are when the event is sent.
func (s *Engine) eventPayload(ev pendingEvent) *runtimeapi.ContainerEventResponse {
	resp := &runtimeapi.ContainerEventResponse{ContainerId: ev.id, ContainerEventType: ev.typ, CreatedAt: ev.at}
	sandboxID := ev.sandboxID
	if st, _, err := s.SandboxStatus(sandboxID, false); err == nil {
		resp.PodSandboxStatus = st
	}
	for _, c := range s.containers.List() {
		if c.SandboxID == sandboxID {
			resp.ContainersStatuses = append(resp.ContainersStatuses, containerStatus(c))
		}
	}
	return resp
}

// SubscribeEvents returns a stream of container lifecycle events and the function that ends it.
// The stream is closed when the subscriber falls a whole buffer behind or the engine closes.
func (s *Engine) SubscribeEvents() (events <-chan *runtimeapi.ContainerEventResponse, unsubscribe func()) {
	b := s.ctr.events
	ch := b.subscribe()
	return ch, func() { b.unsubscribe(ch) }
}
