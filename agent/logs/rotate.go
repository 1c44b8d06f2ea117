package logs

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Runtime is the part of CRI the rotator uses; a runtimeapi.RuntimeServiceClient is one.
type Runtime interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	ReopenContainerLog(ctx context.Context, in *runtimeapi.ReopenContainerLogRequest, opts ...grpc.CallOption) (*runtimeapi.ReopenContainerLogResponse, error)
}

// rotatedTimeFormat is fixed-width so rotated names sort by time as text.
const rotatedTimeFormat = "20060102-150405.000000"

// Rotator keeps each running container's log under MaxSize bytes and at most MaxFiles files
// (the live one included), as containerLogMaxSize and containerLogMaxFiles say. The runtime owns
// the open file, so rotation renames it and asks the runtime, through ReopenContainerLog, to open
// a new one at the same path.
type Rotator struct {
	rt       Runtime
	maxSize  int64
	maxFiles int
	now      func() time.Time

	mu sync.Mutex
	// paths holds the log path of each running container seen: it is fixed when the container is
	// created, so its status is asked once, not at every pass.
	paths map[string]string
}

// NewRotator takes the KubeletConfiguration strings: maxSize as a quantity ("10Mi"), maxFiles >= 2.
func NewRotator(rt Runtime, maxSize string, maxFiles int32) (*Rotator, error) {
	q, err := resource.ParseQuantity(maxSize)
	if err != nil {
		return nil, fmt.Errorf("containerLogMaxSize %q: %w", maxSize, err)
	}
	if q.Value() <= 0 {
		return nil, fmt.Errorf("containerLogMaxSize %q must be positive", maxSize)
	}
	if maxFiles < 2 {
		return nil, fmt.Errorf("containerLogMaxFiles %d: must be at least 2", maxFiles)
	}
	return &Rotator{rt: rt, maxSize: q.Value(), maxFiles: int(maxFiles), now: time.Now}, nil
}

// Run rotates every interval until ctx ends.
func (r *Rotator) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := r.RotateOnce(ctx); err != nil && ctx.Err() == nil {
			slog.Warn("container log rotation", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RotateOnce looks at every running container once. One container's failure does not stop the others.
func (r *Rotator) RotateOnce(ctx context.Context) error {
	resp, err := r.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	paths := make(map[string]string, len(resp.GetContainers()))
	for _, c := range resp.GetContainers() {
		path, ok := r.paths[c.GetId()]
		if !ok {
			st, err := r.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
			if err != nil {
				errs = append(errs, fmt.Errorf("container %s: status: %w", c.GetId(), err))
				continue
			}
			path = st.GetStatus().GetLogPath()
		}
		paths[c.GetId()] = path
		if path == "" {
			continue
		}
		if err := r.rotate(ctx, c.GetId(), path); err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", c.GetId(), err))
		}
	}
	r.paths = paths
	return errors.Join(errs...)
}

// rotate renames a log over maxSize and has the runtime reopen it. As in the kubelet, the rotated
// files are pruned only when one more is made: a log under its size costs one stat.
func (r *Rotator) rotate(ctx context.Context, id, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			// A rename whose reopen failed earlier, or a container that logs nowhere: ask again.
			_, err = r.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id})
			return err
		}
		return err
	}
	if fi.Size() < r.maxSize {
		return nil
	}
	if err := r.prune(path); err != nil {
		return err
	}
	rotated := path + "." + r.now().UTC().Format(rotatedTimeFormat)
	if err := os.Rename(path, rotated); err != nil {
		return fmt.Errorf("rotate log: %w", err)
	}
	if _, err := r.rt.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: id}); err != nil {
		// The runtime still writes to the renamed file; put it back so the path stays the live log.
		if _, serr := os.Stat(path); errors.Is(serr, os.ErrNotExist) {
			if rerr := os.Rename(rotated, path); rerr != nil {
				slog.Warn("restoring container log after failed reopen", "path", path, "err", rerr)
			}
		}
		return fmt.Errorf("reopen container log: %w", err)
	}
	if err := r.compressOlder(path, rotated); err != nil {
		slog.Warn("compressing rotated container logs", "path", path, "err", err)
	}
	return r.prune(path)
}

// compressOlder gzips every rotated file but the newest, as the kubelet does: the newest may
// still get the runtime's last writes from before the reopen, and a plain one keeps `--tail` cheap.
func (r *Rotator) compressOlder(path, newest string) error {
	rotated, err := RotatedFiles(path)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range rotated {
		if f == newest || strings.HasSuffix(f, ".gz") {
			continue
		}
		if err := gzipFile(f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// gzipFile replaces f by f.gz, written to a temporary name first so a crash leaves either file
// whole (RotatedFiles skips the .tmp).
func gzipFile(f string) error {
	in, err := os.Open(f)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := f + ".gz.tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, f+".gz")
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Remove(f)
}

// prune removes the oldest rotated files beyond maxFiles-1.
func (r *Rotator) prune(path string) error {
	rotated, err := RotatedFiles(path)
	if err != nil {
		return err
	}
	for len(rotated) > r.maxFiles-1 {
		if err := os.Remove(rotated[0]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		rotated = rotated[1:]
	}
	return nil
}
