// Package podsource gathers the desired pods from their sources (a manifest folder, an HTTP URL, the
// kube-apiserver) and merges them into one stream of PodUpdates. Each source hands over its whole
// current set each time (Set); the merger works out what was added, updated, deleted, removed or only
// had its status changed, so sources stay simple and a missed notification cannot lose a change.
//
// It is the kubelet's pkg/kubelet/config under a name that says what it holds: beside agentconfig,
// kubeconfig and internal/kubeletconfig, a package called config read as one more of the agent's
// settings.
package podsource

import (
	"log/slog"
	"reflect"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/manifest"
)

// Sources, as the kubelet names them in the kubernetes.io/config.source annotation.
const (
	FileSource      = "file"
	HTTPSource      = "http"
	ApiserverSource = "api"
)

// Annotations the kubelet writes on pods from files and URLs.
const (
	ConfigSourceAnnotation = manifest.ConfigSourceAnnotation
	ConfigHashAnnotation   = manifest.ConfigHashAnnotation
	ConfigMirrorAnnotation = "kubernetes.io/config.mirror"
	ConfigSeenAnnotation   = "kubernetes.io/config.seen"
)

// PodOperation is what happened to the pods of an update.
type PodOperation int

const (
	// ADD: new pods.
	ADD PodOperation = iota
	// UPDATE: pods whose spec or metadata changed.
	UPDATE
	// DELETE: pods the apiserver marked for graceful deletion (DeletionTimestamp set).
	DELETE
	// REMOVE: pods gone from their source; stop them now.
	REMOVE
	// RECONCILE: pods whose only change is their status in the apiserver.
	RECONCILE
)

func (o PodOperation) String() string {
	return [...]string{"ADD", "UPDATE", "DELETE", "REMOVE", "RECONCILE"}[o]
}

// PodUpdate is one batch for the SyncLoop.
type PodUpdate struct {
	Pods   []*v1.Pod
	Op     PodOperation
	Source string
}

// PodConfig merges the sources.
type PodConfig struct {
	mu      sync.Mutex
	pods    map[string]map[types.UID]*v1.Pod
	seen    map[string]bool // sources that delivered a set
	handled map[string]bool // sources whose set the SyncLoop handled (SeenAllSources)
	updates chan PodUpdate
	log     *slog.Logger
}

// NewPodConfig makes a merger.
func NewPodConfig(log *slog.Logger) *PodConfig {
	if log == nil {
		log = slog.Default()
	}
	return &PodConfig{pods: map[string]map[types.UID]*v1.Pod{}, seen: map[string]bool{}, handled: map[string]bool{},
		updates: make(chan PodUpdate, 50), log: log}
}

// Updates is the channel the SyncLoop reads.
func (c *PodConfig) Updates() <-chan PodUpdate { return c.updates }

// SeenAllSources reports whether the SyncLoop has handled a set from each named source: the
// kubelet's sourcesReady, marked after a source's first pods were admitted. Until then
// housekeeping must not treat running pods as orphans, and the managers that hand out CPUs and
// devices must not give back what a pod of a source yet to be heard holds; while the first pods
// are admitted (an agent restarting), containers found running keep their devices as they are.
func (c *PodConfig) SeenAllSources(sources []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range sources {
		if !c.handled[s] {
			return false
		}
	}
	return true
}

// SourceHandled records that the SyncLoop has handled an update of source (after admitting its
// pods, as the kubelet's SyncLoop adds the source to its ready ones).
func (c *PodConfig) SourceHandled(source string) {
	c.mu.Lock()
	c.handled[source] = true
	c.mu.Unlock()
}

// Has reports whether a source lists the pod now. The pods of an update are listed before the
// update is sent, so a pod still waiting in the SyncLoop's queue is already listed.
func (c *PodConfig) Has(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pods := range c.pods {
		if _, ok := pods[uid]; ok {
			return true
		}
	}
	return false
}

// Listed returns "namespace/name" of every pod a source lists now, admitted or not: a pod the
// node refused stays listed (and its events kept) until its source drops it, as in the kubelet,
// where a rejected pod stays in the pod manager.
func (c *PodConfig) Listed() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for _, pods := range c.pods {
		for _, p := range pods {
			out[p.Namespace+"/"+p.Name] = true
		}
	}
	return out
}

// Set replaces the source's pods and sends the differences. It blocks while the SyncLoop is behind.
func (c *PodConfig) Set(source string, pods []*v1.Pod) {
	c.mu.Lock()
	old := c.pods[source]
	next := make(map[types.UID]*v1.Pod, len(pods))
	var adds, updates, deletes, removes, reconciles []*v1.Pod
	names := map[string]bool{}
	for _, p := range pods {
		key := p.Namespace + "/" + p.Name
		if names[key] {
			c.log.Warn("skipping pod with a duplicate name in its source", "source", source, "pod", key)
			continue
		}
		names[key] = true
		next[p.UID] = p
		o, ok := old[p.UID]
		switch {
		case !ok:
			adds = append(adds, p)
		case !specEqual(o, p):
			if o.DeletionTimestamp == nil && p.DeletionTimestamp != nil {
				deletes = append(deletes, p)
			} else {
				updates = append(updates, p)
			}
		case !reflect.DeepEqual(o.Status, p.Status):
			reconciles = append(reconciles, p)
		}
	}
	for uid, o := range old {
		if _, ok := next[uid]; !ok {
			removes = append(removes, o)
		}
	}
	c.pods[source] = next
	first := !c.seen[source]
	c.seen[source] = true
	c.mu.Unlock()

	send := func(op PodOperation, ps []*v1.Pod) {
		if len(ps) > 0 {
			c.updates <- PodUpdate{Pods: ps, Op: op, Source: source}
		}
	}
	send(REMOVE, removes)
	send(ADD, adds)
	send(UPDATE, updates)
	send(DELETE, deletes)
	send(RECONCILE, reconciles)
	if first && len(adds) == 0 {
		// An empty first set still tells the SyncLoop the source has spoken.
		c.updates <- PodUpdate{Op: ADD, Source: source}
	}
}

// specEqual compares what a pod's worker acts on: spec, labels, annotations, deletion.
func specEqual(a, b *v1.Pod) bool {
	return reflect.DeepEqual(a.Spec, b.Spec) && reflect.DeepEqual(a.Labels, b.Labels) &&
		reflect.DeepEqual(a.Annotations, b.Annotations) &&
		reflect.DeepEqual(a.DeletionTimestamp, b.DeletionTimestamp) &&
		reflect.DeepEqual(a.DeletionGracePeriodSeconds, b.DeletionGracePeriodSeconds)
}
