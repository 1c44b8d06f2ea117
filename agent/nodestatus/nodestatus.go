// Package nodestatus registers the Node, keeps its status (Ready follows the runtime's Status),
// and renews its Lease in kube-node-lease, which is what the node lifecycle controller watches.
package nodestatus

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// LeaseNamespace is where node leases live.
const LeaseNamespace = "kube-node-lease"

// AgentVersion is reported as the node's kubelet version.
var AgentVersion = "v1.36.3-nodelet"

// Deps are what the manager needs.
type Deps struct {
	Client   kubernetes.Interface
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

	StatusUpdateFrequency time.Duration // default 10s
	LeaseDurationSeconds  int32         // default 40
	LeaseRenewInterval    time.Duration // default 10s
	Log                   *slog.Logger
}

// Manager runs registration, status and lease.
type Manager struct {
	Deps
	nodeUID atomic.Value // types.UID
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
	m := &Manager{Deps: d}
	m.nodeUID.Store(types.UID(""))
	return m
}

// NodeUID is the registered Node's UID, "" before registration.
func (m *Manager) NodeUID() types.UID { return m.nodeUID.Load().(types.UID) }

// Run registers the node (retrying), then updates status and lease until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	for {
		err := m.Register(ctx)
		if err == nil {
			break
		}
		m.Log.Warn("register node", "node", m.NodeName, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	statusT := time.NewTicker(m.StatusUpdateFrequency)
	defer statusT.Stop()
	leaseT := time.NewTicker(m.LeaseRenewInterval)
	defer leaseT.Stop()
	if err := m.RenewLease(ctx); err != nil {
		m.Log.Warn("renew lease", "err", err)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-statusT.C:
			if err := m.UpdateStatus(ctx); err != nil {
				m.Log.Warn("update node status", "err", err)
			}
		case <-leaseT.C:
			if err := m.RenewLease(ctx); err != nil {
				m.Log.Warn("renew lease", "err", err)
			}
		}
	}
}

// Register creates the Node, or refreshes the status of an existing one.
func (m *Manager) Register(ctx context.Context) error {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Labels: map[string]string{
		"kubernetes.io/hostname":  m.NodeName,
		"kubernetes.io/os":        goruntime.GOOS,
		"kubernetes.io/arch":      goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}}}
	for k, v := range m.Labels {
		node.Labels[k] = v
	}
	node.Spec.Taints = append([]v1.Taint(nil), m.Taints...)
	m.fillStatus(ctx, &node.Status)
	created, err := m.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	switch {
	case err == nil:
		m.nodeUID.Store(created.UID)
		// Status is a subresource: a create may drop it, so write it once more.
		return m.UpdateStatus(ctx)
	case apierrors.IsAlreadyExists(err):
		existing, err := m.Client.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m.nodeUID.Store(existing.UID)
		return m.UpdateStatus(ctx)
	}
	return err
}

// UpdateStatus writes the node's status: addresses, capacity, info, and conditions.
func (m *Manager) UpdateStatus(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := m.Client.CoreV1().Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m.fillStatus(ctx, &node.Status)
		_, err = m.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func (m *Manager) fillStatus(ctx context.Context, s *v1.NodeStatus) {
	now := metav1.NewTime(time.Now())
	capacity := Capacity(m.MaxPods, m.RootDir)
	s.Capacity = capacity
	s.Allocatable = capacity.DeepCopy()
	s.Addresses = nil
	for _, ip := range m.NodeIPs {
		s.Addresses = append(s.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: ip})
	}
	s.Addresses = append(s.Addresses, v1.NodeAddress{Type: v1.NodeHostName, Address: m.NodeName})
	s.NodeInfo = nodeInfo()
	s.NodeInfo.KubeletVersion = AgentVersion
	if m.Runtime != nil {
		if v, err := m.Runtime.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
			s.NodeInfo.ContainerRuntimeVersion = v.RuntimeName + "://" + v.RuntimeVersion
		}
	}
	s.Images = m.images(ctx)
	ready, reason, msg, handlers := m.runtimeStatus(ctx)
	s.RuntimeHandlers = handlers
	conds := []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		{Type: v1.NodeReady, Status: v1.ConditionFalse, Reason: reason, Message: msg},
	}
	if ready {
		conds[3].Status, conds[3].Reason, conds[3].Message = v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status"
	}
	old := map[v1.NodeConditionType]v1.NodeCondition{}
	for _, c := range s.Conditions {
		old[c.Type] = c
	}
	for i := range conds {
		conds[i].LastHeartbeatTime = now
		conds[i].LastTransitionTime = now
		if o, ok := old[conds[i].Type]; ok && o.Status == conds[i].Status {
			conds[i].LastTransitionTime = o.LastTransitionTime
		}
	}
	s.Conditions = conds
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
	sort.SliceStable(imgs, func(i, j int) bool { return imgs[i].GetSize() > imgs[j].GetSize() })
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

// RenewLease creates or renews the node's Lease.
func (m *Manager) RenewLease(ctx context.Context) error {
	leases := m.Client.CoordinationV1().Leases(LeaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	holder := m.NodeName
	dur := m.LeaseDurationSeconds
	lease, err := leases.Get(ctx, m.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Namespace: LeaseNamespace},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}
		if uid := m.NodeUID(); uid != "" {
			l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: m.NodeName, UID: uid}}
		}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &holder, &dur, &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

// Host facts, read from files rather than any network lookup.

// Capacity is the node's capacity as the Node reports it: this machine's CPUs and memory, maxPods
// pods, and as ephemeral-storage the size of the filesystem holding rootDir (the agent's root, where
// emptyDir volumes and pod files live), as the kubelet reports its root filesystem. Allocatable is
// the same for now (nothing is reserved for the system). What cannot be read is left out rather
// than reported as 0.
func Capacity(maxPods int, rootDir string) v1.ResourceList {
	c := v1.ResourceList{
		v1.ResourceCPU:  *resource.NewQuantity(int64(goruntime.NumCPU()), resource.DecimalSI),
		v1.ResourcePods: *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	if mem := memTotal(); mem > 0 {
		c[v1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	}
	var st unix.Statfs_t
	if rootDir != "" && unix.Statfs(rootDir, &st) == nil && st.Blocks > 0 {
		c[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(st.Blocks)*st.Bsize, resource.BinarySI)
	}
	return c
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func nodeInfo() v1.NodeSystemInfo {
	info := v1.NodeSystemInfo{OperatingSystem: goruntime.GOOS, Architecture: goruntime.GOARCH}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		info.KernelVersion = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				info.OSImage = strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		info.MachineID = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		info.BootID = strings.TrimSpace(string(b))
	}
	return info
}
