// Package nodestatus builds the Node (labels, taints, capacity, addresses, info, images, runtime
// handlers, conditions) and keeps it current, also without a cluster so the agent's API can show
// it; in a cluster it registers the Node, posts its status and renews its Lease in
// kube-node-lease, which is what the node lifecycle controller watches. It records the node's
// events as the kubelet does (Starting, Ready and pressure transitions, Rebooted).
package nodestatus

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nodelet/nodelet/agent/kubeclient"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LeaseNamespace is where node leases live.
const LeaseNamespace = "kube-node-lease"

// AgentVersion is reported as the node's kubelet version.
var AgentVersion = "v1.36.3-nodelet"

// Recorder records the node's events; a record.EventRecorder is one.
type Recorder interface {
	Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Client is the apiserver as the manager writes the Node and its Lease (a *kubeclient.Client is one).
type Client interface {
	Nodes() kubeclient.NodeInterface
	Leases(namespace string) kubeclient.LeaseInterface
}

// Deps are what the manager needs.
type Deps struct {
	// Client, when set, registers and posts the Node; nil keeps it in memory only (standalone).
	Client   Client
	Runtime  runtimeapi.RuntimeServiceClient
	NodeName string
	NodeIPs  []string
	MaxPods  int
	// RootDir is the agent's root: its filesystem is the node's ephemeral-storage.
	RootDir string
	// Images lists the node's images for the Node's status (nil: none reported).
	Images runtimeapi.ImageServiceClient
	// Labels are added to the Node at registration (--node-labels).
	Labels map[string]string
	// Taints are set on the Node when it registers (--register-with-taints), as the kubelet does:
	// later changes are the cluster's to make.
	Taints []v1.Taint
	// Pressure gives the MemoryPressure, DiskPressure and PIDPressure conditions (Type, Status,
	// Reason, Message) as measured by the eviction manager. Nil: the node claims none of them,
	// since claiming "no pressure" without measuring it would mislead the scheduler.
	Pressure func() []v1.NodeCondition
	// Resources gives the Node's capacity and allocatable (the container manager's); nil reports
	// Capacity as both.
	Resources func() (capacity, allocatable v1.ResourceList)
	// Devices are the device plugins' resources (nil: none).
	Devices DeviceResources
	// VolumesInUse are the attachable volumes the node's pods use (status.volumesInUse), which
	// the attach/detach controller does not detach; nil reports none.
	VolumesInUse func() []v1.UniqueVolumeName
	// Recorder receives the node's events (nil: none recorded).
	Recorder Recorder
	// Watched returns the registered Node as a watch of it last saw it (the agent's node lister);
	// a status update starts from it rather than a GET, as the kubelet's starts from its informer.
	// Nil, or an error, reads it from the apiserver's cache.
	Watched func() (*v1.Node, error)
	// PodCIDR is handed to the runtime when standalone (podCIDR, --pod-cidr); in a cluster the
	// Node's spec.podCIDRs are.
	PodCIDR string

	StatusUpdateFrequency time.Duration // default 10s
	// StatusReportFrequency: a status that changed in nothing but its heartbeats is posted only
	// this long after the last post (the kubelet's nodeStatusReportFrequency), the Lease telling
	// the cluster meanwhile that the node lives; 0 posts it at every update.
	StatusReportFrequency time.Duration
	LeaseDurationSeconds  int32         // default 40
	LeaseRenewInterval    time.Duration // default 10s
	Log                   *slog.Logger
}

// Manager runs registration, status and lease.
type Manager struct {
	Deps
	nodeUID atomic.Value // types.UID
	now     func() time.Time

	updating sync.Mutex // held through an UpdateStatus

	mu          sync.Mutex
	lease       *coordinationv1.Lease // as last written, renewed without a read; nil: read it first
	node        *v1.Node              // the latest built or posted, nil before the first
	sentPodCIDR string                // what the runtime was last given by UpdateRuntimeConfig
	posted      time.Time             // when the status was last posted
	// resetExtended: registration found the Node and the device manager vouches for none of its
	// extended resources; they are zeroed until a status update has posted that.
	resetExtended bool
}

// New makes a manager.
func New(d Deps) *Manager {
	if d.StatusUpdateFrequency == 0 {
		d.StatusUpdateFrequency = 10 * time.Second
	}
	if d.LeaseDurationSeconds == 0 {
		d.LeaseDurationSeconds = 40
	}
	if d.LeaseRenewInterval == 0 {
		d.LeaseRenewInterval = 10 * time.Second
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	m := &Manager{Deps: d, now: time.Now}
	m.nodeUID.Store(types.UID(""))
	return m
}

// Node is the latest Node, built or posted; false before the first.
func (m *Manager) Node() (*v1.Node, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node == nil {
		return nil, false
	}
	return m.node.DeepCopy(), true
}

func (m *Manager) setNode(n *v1.Node) {
	m.mu.Lock()
	m.node = n.DeepCopy()
	m.mu.Unlock()
}

// Ref is how the kubelet names its Node in events: the UID is the node's name, so events can be
// recorded before (and without) the Node object.
func Ref(nodeName string) *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: nodeName, UID: types.UID(nodeName)}
}

// event is one node event, recorded once the status that caused it is in place.
type event struct{ typ, reason, message string }

func (m *Manager) record(evs []event) {
	if m.Recorder == nil {
		return
	}
	for _, e := range evs {
		m.Recorder.Eventf(Ref(m.NodeName), e.typ, e.reason, "%s", e.message)
	}
}

// Build brings the in-memory Node up to date without a cluster: the first call makes it from the
// configuration, later ones refresh its status from the last.
func (m *Manager) Build(ctx context.Context) *v1.Node {
	node, ok := m.Node()
	if !ok {
		node = m.initialNode()
		node.CreationTimestamp = metav1.NewTime(m.now())
	}
	evs := m.fillStatus(ctx, &node.Status)
	m.setNode(node)
	m.record(evs)
	return node
}

// NodeUID is the registered Node's UID, "" before registration.
func (m *Manager) NodeUID() types.UID { return m.nodeUID.Load().(types.UID) }

// UpdateStatus writes the node's status: addresses, capacity, info, and conditions.
// As the kubelet, the first read comes from the apiserver's cache (resourceVersion 0), a retry
// after a conflict from etcd; a status unchanged but for its heartbeats is posted only once per
// StatusReportFrequency.
func (m *Manager) UpdateStatus(ctx context.Context) error {
	// One update at a time: the periodic loop and the one that waits for Ready may meet.
	m.updating.Lock()
	defer m.updating.Unlock()
	try := 0
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		try++
		node, err := m.current(ctx, try == 1)
		if err != nil {
			return err
		}
		before := node.Status.DeepCopy()
		evs := m.fillStatus(ctx, &node.Status)
		now := m.now()
		m.mu.Lock()
		due := m.StatusReportFrequency <= 0 || m.posted.IsZero() || now.Sub(m.posted) >= m.StatusReportFrequency
		m.mu.Unlock()
		if !due && len(evs) == 0 && sameButHeartbeats(before, &node.Status) {
			return nil
		}
		if !due {
			m.Log.Debug("node status changed", "fields", changedFields(before, &node.Status))
		}
		updated, err := m.Client.Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		m.setNode(updated)
		m.mu.Lock()
		m.posted, m.resetExtended = now, false
		m.mu.Unlock()
		m.record(evs)
		return nil
	})
}

// current is the Node to update: at a first try the watched copy (else the apiserver's cache,
// resourceVersion 0), after a conflict the apiserver's latest.
func (m *Manager) current(ctx context.Context, first bool) (*v1.Node, error) {
	if first && m.Watched != nil {
		if n, err := m.Watched(); err == nil && n != nil && n.Name == m.NodeName {
			return n.DeepCopy(), nil
		}
	}
	opts := metav1.GetOptions{}
	if first {
		opts.ResourceVersion = "0"
	}
	return m.Client.Nodes().Get(ctx, m.NodeName, opts)
}

// fillStatus refreshes s and returns the events its changes call for, to be recorded once the
// status is in place (a retried update must not record them twice).
func (m *Manager) fillStatus(ctx context.Context, s *v1.NodeStatus) []event {
	var evs []event
	now := metav1.NewTime(m.now())
	if m.Resources != nil {
		capacity, allocatable := m.Resources()
		setResources(s, capacity, allocatable)
	} else {
		capacity := Capacity(m.MaxPods, m.RootDir)
		setResources(s, capacity, capacity)
	}
	if m.Devices != nil {
		m.mu.Lock()
		reset := m.resetExtended
		m.mu.Unlock()
		setDeviceResources(s, m.Devices, reset)
	}
	s.Addresses = nil
	for _, ip := range m.NodeIPs {
		s.Addresses = append(s.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	s.Addresses = append(s.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: m.NodeName})
	oldBootID := s.NodeInfo.BootID
	s.NodeInfo = nodeInfo()
	s.NodeInfo.KubeletVersion = AgentVersion
	if oldBootID != "" && s.NodeInfo.BootID != "" && oldBootID != s.NodeInfo.BootID {
		evs = append(evs, event{v1.EventTypeWarning, "Rebooted",
			fmt.Sprintf("Node %s has been rebooted, boot id: %s", m.NodeName, s.NodeInfo.BootID)})
	}
	if m.Runtime != nil {
		if v, err := m.Runtime.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
			s.NodeInfo.ContainerRuntimeVersion = v.RuntimeName + "://" + v.RuntimeVersion
		}
	}
	s.Images = m.images(ctx)
	if m.VolumesInUse != nil {
		s.VolumesInUse = m.VolumesInUse()
	}
	ready, reason, msg, handlers := m.runtimeStatus(ctx)
	s.RuntimeHandlers = handlers
	var conds []v1.NodeCondition
	if m.Pressure != nil {
		given := map[v1.NodeConditionType]v1.NodeCondition{}
		for _, c := range m.Pressure() {
			given[c.Type] = c
		}
		for _, t := range pressureTypes {
			if c, ok := given[t]; ok {
				conds = append(conds, v1.NodeCondition{Type: t, Status: c.Status, Reason: c.Reason, Message: c.Message})
			}
		}
	}
	readyCond := v1.NodeCondition{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: reason, Message: msg}
	if ready {
		readyCond.Status, readyCond.Reason, readyCond.Message = v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"
	}
	conds = append(conds, readyCond)
	old := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, c := range s.Conditions {
		old[c.Type] = c
	}
	for i := range conds {
		c := &conds[i]
		c.LastHeartbeatTime = now
		c.LastTransitionTime = now
		o, had := old[c.Type]
		if had && o.Status == c.Status {
			c.LastTransitionTime = o.LastTransitionTime
			continue
		}
		if reasons, isPressure := pressureEvents(c.Type); isPressure {
			// As the kubelet: a pressure condition's first appearance is a transition from Unknown.
			switch c.Status {
			case v1.ConditionFalse:
				evs = append(evs, m.statusEvent(reasons[0]))
			case v1.ConditionTrue:
				evs = append(evs, m.statusEvent(reasons[1]))
			}
		} else if had && c.Type == v1.NodeReady {
			if c.Status == v1.ConditionTrue {
				evs = append(evs, m.statusEvent("NodeReady"))
			} else {
				evs = append(evs, m.statusEvent("NodeNotReady"))
			}
		}
	}
	// Conditions others set (a node problem detector's) stay; the four of the agent are its own,
	// so a pressure condition is dropped once nothing measures it.
	for _, c := range s.Conditions {
		if _, ours := pressureEvents(c.Type); !ours && c.Type != v1.NodeReady {
			conds = append(conds, c)
		}
	}
	s.Conditions = conds
	return evs
}

func (m *Manager) statusEvent(reason string) event {
	return event{v1.EventTypeNormal, reason, fmt.Sprintf("Node %s status is now: %s", m.NodeName, reason)}
}

// runtimeStatus asks the runtime's Status: Ready needs RuntimeReady and NetworkReady; the runtime
// handlers it lists (with their features) go into the Node's status, as the kubelet reports them.
func (m *Manager) runtimeStatus(ctx context.Context) (bool, string, string, []v1.NodeRuntimeHandler) {
	if m.Runtime == nil {
		return false, "KubeletNotReady", "no container runtime", nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := m.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return false, "KubeletNotReady", fmt.Sprintf("container runtime is down: %v", err), nil
	}
	var handlers []v1.NodeRuntimeHandler
	for _, h := range st.GetRuntimeHandlers() {
		nh := v1.NodeRuntimeHandler{Name: h.GetName()}
		if f := h.GetFeatures(); f != nil {
			rro, userns := f.GetRecursiveReadOnlyMounts(), f.GetUserNamespaces()
			nh.Features = &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &rro, UserNamespaces: &userns}
		}
		handlers = append(handlers, nh)
	}
	var problems []string
	for _, want := range []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady} {
		found := false
		for _, c := range st.GetStatus().GetConditions() {
			if c.Type == want {
				found = true
				if !c.Status {
					problems = append(problems, fmt.Sprintf("%s=false reason:%s message:%s", c.Type, c.Reason, c.Message))
				}
			}
		}
		if !found {
			problems = append(problems, want+" missing")
		}
	}
	if len(problems) > 0 {
		return false, "KubeletNotReady", "container runtime status check failed: " + strings.Join(problems, "; "), handlers
	}
	return true, "", "", handlers
}

// maxStatusImages is the kubelet's nodeStatusMaxImages: the largest images are reported.
const maxStatusImages = 50

// images are the node's images, largest first, for the scheduler's image locality scoring.
func (m *Manager) images(ctx context.Context) []v1.ContainerImage {
	if m.Images == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := m.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		m.Log.Warn("list images for the node status", "err", err)
		return nil
	}
	imgs := resp.GetImages()
	// Largest first, as the kubelet lists them; images of one size by ID, so an unchanged set
	// of images is the same list at every update and does not make a status worth posting.
	sort.Slice(imgs, func(i, j int) bool {
		if imgs[i].GetSize() != imgs[j].GetSize() {
			return imgs[i].GetSize() > imgs[j].GetSize()
		}
		return imgs[i].GetId() < imgs[j].GetId()
	})
	var out []v1.ContainerImage
	for _, img := range imgs {
		names := append(append([]string(nil), img.GetRepoTags()...), img.GetRepoDigests()...)
		if len(names) == 0 {
			continue
		}
		out = append(out, v1.ContainerImage{Names: names, SizeBytes: int64(img.GetSize())})
		if len(out) == maxStatusImages {
			break
		}
	}
	return out
}
