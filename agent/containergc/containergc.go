// Package containergc removes what dead pods and restarted containers leave in the runtime:
// exited containers beyond MaxPerPodContainer per (pod, container name) — the newest stays, its
// exit code feeds lastState and the restart count — all dead containers and sandboxes of pods the
// agent no longer has, and the logs of every container it removes. It runs from housekeeping; the
// runtime manager already prunes a live pod at each sync, so this is the net under restarts and
// deletions that happened while the agent was away.
package containergc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// Runtime is the part of CRI the collector uses (a runtimeapi.RuntimeServiceClient).
type Runtime interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	RemoveContainer(ctx context.Context, in *runtimeapi.RemoveContainerRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error)
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	RemovePodSandbox(ctx context.Context, in *runtimeapi.RemovePodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error)
}

// Pods tells which pods the agent still has. Deleted is true for a pod no source has any more (or
// whose deletion finished); only then do its last containers and sandboxes go.
type Pods interface {
	Deleted(uid types.UID) bool
}

// DeletedFunc is a Pods of one function (podstate.View.Gone).
type DeletedFunc func(uid types.UID) bool

// Deleted calls f.
func (f DeletedFunc) Deleted(uid types.UID) bool { return f(uid) }

// Policy is the kubelet's container GC policy.
type Policy struct {
	// MinAge: a dead container younger than this stays (0: none is kept for age).
	MinAge time.Duration
	// MaxPerPodContainer dead containers are kept per (pod, container name) of a live pod; <0 no limit.
	MaxPerPodContainer int
	// MaxContainers dead containers are kept in all; <0 no limit.
	MaxContainers int
}

// DefaultPolicy is the kubelet's: keep the last dead container of each, no global limit.
var DefaultPolicy = Policy{MaxPerPodContainer: 1, MaxContainers: -1}

// GC is the collector.
type GC struct {
	Runtime Runtime
	Pods    Pods
	Policy  Policy
	// PodLogsDir (/var/log/pods): folders of deleted pods are removed once their sandboxes are.
	PodLogsDir string
	Log        *slog.Logger
	Now        func() time.Time
}

// Stats is what one collection did.
type Stats struct {
	Containers, Sandboxes, LogDirs int
}

type dead struct {
	id      string
	created time.Time
	pod     types.UID
	name    string
}

// Collect runs one collection. Failures to remove one object are logged and do not stop the rest.
func (g *GC) Collect(ctx context.Context) (Stats, error) {
	var st Stats
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	log := g.logger()
	cs, err := g.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return st, fmt.Errorf("list containers: %w", err)
	}
	groups := map[string][]dead{}
	liveIn := map[string]int{} // sandbox ID → containers that stay
	for _, c := range cs.Containers {
		created := time.Unix(0, c.CreatedAt)
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING || c.State == runtimeapi.ContainerState_CONTAINER_CREATED ||
			now().Sub(created) < g.Policy.MinAge {
			liveIn[c.PodSandboxId]++
			continue
		}
		uid := types.UID(c.Labels[kubecontainer.LabelPodUID])
		k := string(uid) + "/" + c.Labels[kubecontainer.LabelContainerName]
		groups[k] = append(groups[k], dead{id: c.Id, created: created, pod: uid, name: c.Labels[kubecontainer.LabelContainerName]})
		liveIn[c.PodSandboxId]++ // until removed below
	}
	sandboxOf := map[string]string{}
	for _, c := range cs.Containers {
		sandboxOf[c.Id] = c.PodSandboxId
	}

	var remove, keep []dead
	for _, g2 := range groups {
		sort.Slice(g2, func(i, j int) bool { return g2[i].created.After(g2[j].created) })
		n := g.Policy.MaxPerPodContainer
		switch {
		case g2[0].pod == "" || g.Pods.Deleted(g2[0].pod):
			n = 0 // unlabelled containers are not the agent's to keep; deleted pods keep nothing
		case n < 0:
			n = len(g2)
		}
		n = min(n, len(g2))
		keep = append(keep, g2[:n]...)
		remove = append(remove, g2[n:]...)
	}
	if max := g.Policy.MaxContainers; max >= 0 && len(keep) > max {
		sort.Slice(keep, func(i, j int) bool { return keep[i].created.After(keep[j].created) })
		remove = append(remove, keep[max:]...)
	}
	for _, d := range remove {
		if err := g.removeContainer(ctx, d.id); err != nil {
			log.Warn("container gc", "container", d.id, "err", err)
			continue
		}
		liveIn[sandboxOf[d.id]]--
		st.Containers++
	}

	sbs, err := g.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return st, fmt.Errorf("list sandboxes: %w", err)
	}
	newest := map[types.UID]*runtimeapi.PodSandbox{}
	for _, sb := range sbs.Items {
		uid := types.UID(sb.Labels[kubecontainer.LabelPodUID])
		if n := newest[uid]; n == nil || sb.CreatedAt > n.CreatedAt {
			newest[uid] = sb
		}
	}
	left := map[types.UID]bool{}
	for _, sb := range sbs.Items {
		uid := types.UID(sb.Labels[kubecontainer.LabelPodUID])
		deleted := uid == "" || g.Pods.Deleted(uid)
		// A live pod keeps its newest sandbox even when stopped: the next sync decides what to do with it.
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY || liveIn[sb.Id] > 0 || (!deleted && newest[uid] == sb) {
			left[uid] = true
			continue
		}
		if _, err := g.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil && status.Code(err) != codes.NotFound {
			log.Warn("sandbox gc", "sandbox", sb.Id, "err", err)
			left[uid] = true
			continue
		}
		st.Sandboxes++
	}
	n, err := g.removePodLogDirs(left)
	st.LogDirs = n
	return st, err
}

func (g *GC) removeContainer(ctx context.Context, id string) error {
	return RemoveContainer(ctx, g.Runtime, id)
}

// ContainerRemover is the part of CRI RemoveContainer needs.
type ContainerRemover interface {
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	RemoveContainer(ctx context.Context, in *runtimeapi.RemoveContainerRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error)
}

// RemoveContainer removes the container, then its log and rotated logs, which the runtime leaves
// (the kubelet removes them too). NotFound is not an error.
func RemoveContainer(ctx context.Context, rt ContainerRemover, id string) error {
	logPath := ""
	if s, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id}); err == nil && s.Status != nil {
		logPath = s.Status.LogPath
	}
	if _, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil && status.Code(err) != codes.NotFound {
		return err
	}
	if logPath == "" || !filepath.IsAbs(logPath) {
		return nil
	}
	rotated, _ := filepath.Glob(logPath + ".*")
	var errs []error
	for _, p := range append(rotated, logPath) {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removePodLogDirs removes <ns>_<name>_<uid> folders of deleted pods with no sandbox left.
func (g *GC) removePodLogDirs(left map[types.UID]bool) (int, error) {
	if g.PodLogsDir == "" {
		return 0, nil
	}
	entries, err := os.ReadDir(g.PodLogsDir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		i := strings.LastIndexByte(e.Name(), '_')
		if !e.IsDir() || i < 0 {
			continue
		}
		uid := types.UID(e.Name()[i+1:])
		if uid == "" || left[uid] || !g.Pods.Deleted(uid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(g.PodLogsDir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// DeleteDeadContainers is the eviction manager's node-level reclaim of disk: a collection now
// rather than at the next period. It keeps the policy, as the kubelet's does: the last dead
// container of each is what restart counts and back-off are read from.
func (g *GC) DeleteDeadContainers(ctx context.Context) error {
	st, err := g.Collect(ctx)
	if st != (Stats{}) {
		g.logger().Info("eviction: removed dead containers", "containers", st.Containers, "sandboxes", st.Sandboxes, "logDirs", st.LogDirs)
	}
	return err
}

func (g *GC) logger() *slog.Logger {
	if g.Log == nil {
		return slog.Default()
	}
	return g.Log
}
