// Package recorder sends the agent's events to the apiserver (or, standalone, to the log) and
// keeps the recent ones for `nodelet describe` (History).
//
// client-go's tools/record would do it, but it links strategic merge patch and through it the
// OpenAPI models (kube-openapi, gnostic, their protobuf descriptors), whose inits run in every
// mode of the binary. This is the part of it a node agent needs: events are queued without
// blocking the caller, an event that repeats (same object, type, reason, message and source)
// becomes a count increment on the event already posted, and each object may post a burst of
// events, then one every few minutes, so a crash-looping pod cannot flood the apiserver.
package recorder

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ref "k8s.io/client-go/tools/reference"
)

// Interface records events about objects; client-go's record.EventRecorder has the same methods,
// so either serves wherever the agent takes one.
type Interface interface {
	Event(obj runtime.Object, eventtype, reason, message string)
	Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any)
	AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any)
}

// Discard drops every event.
type Discard struct{}

func (Discard) Event(runtime.Object, string, string, string)          {}
func (Discard) Eventf(runtime.Object, string, string, string, ...any) {}
func (Discard) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}

// Sink is where events go: the apiserver's events of a namespace (a *kubeclient.Client's Events
// satisfies it).
type Sink interface {
	Create(ctx context.Context, ev *v1.Event, opts metav1.CreateOptions) (*v1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*v1.Event, error)
}

// Limits of the recorder, close to the kubelet's.
const (
	queueLen      = 1000             // events waiting to be sent; beyond, new ones are dropped
	cacheSize     = 4096             // distinct events remembered for counting repeats
	burst         = 25               // events an object may post at once
	refillEvery   = 5 * time.Minute  // and then one more per this
	maxAttempts   = 12               // tries to post one event
	retryInterval = 10 * time.Second // between them
)

// Recorder turns events into Event objects in the apiserver. Make it with New; Run sends.
type Recorder struct {
	sink   func(namespace string) Sink
	scheme *runtime.Scheme
	source v1.EventSource
	log    *slog.Logger
	now    func() time.Time
	retry  time.Duration

	queue chan *v1.Event

	mu      sync.Mutex
	seen    map[string]*seenEvent // by repeatKey
	order   []string              // repeatKeys, oldest first, to bound seen
	buckets map[string]*bucket    // by involved object
}

type seenEvent struct {
	name, namespace string
	count           int32
	first           metav1.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

// New makes a recorder posting through sink, naming objects' kinds from scheme and signing
// events with source (the kubelet's is Component "kubelet", Host the node name).
func New(sink func(namespace string) Sink, scheme *runtime.Scheme, source v1.EventSource, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{sink: sink, scheme: scheme, source: source, log: log, now: time.Now, retry: retryInterval,
		queue: make(chan *v1.Event, queueLen), seen: map[string]*seenEvent{}, buckets: map[string]*bucket{}}
}

func (r *Recorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.record(obj, nil, eventtype, reason, message)
}

func (r *Recorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.record(obj, nil, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r *Recorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, format string, args ...any) {
	r.record(obj, annotations, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r *Recorder) record(obj runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	involved, err := ref.GetReference(r.scheme, obj)
	if err != nil {
		r.log.Warn("event about an object that cannot be referenced", "reason", reason, "err", err)
		return
	}
	now := metav1.NewTime(r.now())
	ns := involved.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &v1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("%v.%x", involved.Name, now.UnixNano()),
			Namespace:   ns,
			Annotations: annotations,
		},
		InvolvedObject: *involved, Reason: reason, Message: message, Type: eventtype,
		FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: r.source,
		ReportingController: r.source.Component, ReportingInstance: r.source.Host,
	}
	select {
	case r.queue <- ev:
	default:
		r.log.Warn("event dropped: too many waiting", "object", involved.Kind+"/"+involved.Name, "reason", reason)
	}
}

// Run posts queued events until ctx ends.
func (r *Recorder) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-r.queue:
			r.post(ctx, ev)
		}
	}
}

func repeatKey(ev *v1.Event) string {
	o := ev.InvolvedObject
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s", ev.Source.Component, ev.Source.Host,
		o.Kind, o.Namespace, o.Name, o.UID, o.FieldPath, ev.Type, ev.Reason, ev.Message)
}

// allow takes a token of the involved object's bucket.
func (r *Recorder) allow(ev *v1.Event) bool {
	o := ev.InvolvedObject
	key := o.Kind + "/" + o.Namespace + "/" + o.Name + "/" + string(o.UID)
	now := ev.LastTimestamp.Time
	b := r.buckets[key]
	if b == nil {
		if len(r.buckets) >= cacheSize {
			r.buckets = map[string]*bucket{} // forget all rather than grow: a fresh burst is harmless
		}
		b = &bucket{tokens: burst, at: now}
		r.buckets[key] = b
	}
	b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()/refillEvery.Seconds())
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// post sends one event: a repeat patches the count of the one already posted, anything else is
// created. Failures are retried a few times; an event is never worth blocking the agent for.
func (r *Recorder) post(ctx context.Context, ev *v1.Event) {
	key := repeatKey(ev)
	r.mu.Lock()
	if !r.allow(ev) {
		r.mu.Unlock()
		return
	}
	prev := r.seen[key]
	var patch []byte
	if prev != nil {
		prev.count++
		ev.Name, ev.Namespace, ev.Count, ev.FirstTimestamp = prev.name, prev.namespace, prev.count, prev.first
		patch, _ = json.Marshal(map[string]any{"count": ev.Count, "lastTimestamp": ev.LastTimestamp, "message": ev.Message})
	}
	r.mu.Unlock()

	sink := r.sink(ev.Namespace)
	for attempt := 1; ; attempt++ {
		var err error
		if patch != nil {
			_, err = sink.Patch(ctx, ev.Name, types.MergePatchType, patch, metav1.PatchOptions{})
			if apierrors.IsNotFound(err) {
				// The apiserver let the event expire: start it afresh under a new name.
				patch = nil
				ev.Name = fmt.Sprintf("%v.%x", ev.InvolvedObject.Name, r.now().UnixNano())
				ev.Count, ev.FirstTimestamp, ev.ResourceVersion = 1, ev.LastTimestamp, ""
				_, err = sink.Create(ctx, ev, metav1.CreateOptions{})
			}
		} else {
			_, err = sink.Create(ctx, ev, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				err = nil
			}
		}
		if err == nil {
			r.remember(key, ev)
			return
		}
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) {
			// The namespace is going away, or the apiserver will never take it: retrying cannot help.
			r.log.Debug("event not accepted", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "err", err)
			return
		}
		if attempt >= maxAttempts {
			r.log.Warn("event dropped after retries", "reason", ev.Reason, "object", ev.InvolvedObject.Name, "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.retry):
		}
	}
}

func (r *Recorder) remember(key string, ev *v1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.seen[key]; s != nil {
		s.name, s.namespace, s.count, s.first = ev.Name, ev.Namespace, ev.Count, ev.FirstTimestamp
		return
	}
	if len(r.order) >= cacheSize {
		delete(r.seen, r.order[0])
		r.order = r.order[1:]
	}
	r.seen[key] = &seenEvent{name: ev.Name, namespace: ev.Namespace, count: ev.Count, first: ev.FirstTimestamp}
	r.order = append(r.order, key)
}
