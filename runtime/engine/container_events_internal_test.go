package engine

import (
	"fmt"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/store"
)

func newEventsTestEngine() *Engine {
	return &Engine{
		sandboxes:  store.NewRegistry[*store.Sandbox](),
		containers: store.NewRegistry[*store.Container](),
	}
}

// TestEventsBroadcasterSlowSubscriber: a subscriber that never reads is cut off once its buffer is
// full, publishing never blocks, and a reading subscriber gets every event in order.
func TestEventsBroadcasterSlowSubscriber(t *testing.T) {
	s := newEventsTestEngine()
	b := newBroadcaster(s)
	defer b.close()
	slow := b.subscribe()
	fast := b.subscribe()
	const n = eventSubscriberLen * 2
	got := make(chan []string, 1)
	go func() {
		var ids []string
		for ev := range fast {
			ids = append(ids, ev.ContainerId)
			if len(ids) == n {
				break
			}
		}
		got <- ids
	}()
	for i := 0; i < n; i++ {
		b.publish(fmt.Sprintf("%04x", i), "", runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
		if i%256 == 255 {
			// Let the reader keep up, as a live client does: no more than a batch in flight.
			for len(b.queue) > 0 || len(fast) > eventSubscriberLen/2 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	select {
	case ids := <-got:
		for i, id := range ids {
			if id != fmt.Sprintf("%04x", i) {
				t.Fatalf("event %d is %s", i, id)
			}
		}
	case <-time.After(time.Minute):
		t.Fatal("the reading subscriber did not get every event")
	}
	// The slow one was closed after its buffer filled.
	count := 0
	for range slow {
		count++
	}
	if count != eventSubscriberLen {
		t.Fatalf("slow subscriber got %d events before being cut, want %d", count, eventSubscriberLen)
	}
}

// TestEventsBroadcasterNoSubscribers: events without subscribers cost nothing and never block.
func TestEventsBroadcasterNoSubscribers(t *testing.T) {
	b := newBroadcaster(newEventsTestEngine())
	defer b.close()
	for i := 0; i < eventQueueLen*3; i++ {
		b.publish("ab", "", runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	}
	b.close()
	if ch := b.subscribe(); ch != nil {
		if _, ok := <-ch; ok {
			t.Fatal("subscribe after close got an open stream")
		}
	}
}
