package kuberuntime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/agent/logs"
	"github.com/nodelet/nodelet/internal/regularfile"
)

// AnnotationTerminationMessageFile names the host file mounted at the container's
// terminationMessagePath, inside pods/<uid>/containers/<name>/. Only the name is kept, never a
// path: an agent restarted after SIGKILL finds the file again from what every CRI runtime returns
// (annotations), and nothing the runtime reports can point the agent at another host file.
const AnnotationTerminationMessageFile = "io.nodelet.container.terminationMessageFile"

// The kubelet's bounds on a termination message: the file's last 4096 bytes, or the log's last 80
// lines and at most 2048 bytes of them.
const (
	maxTerminationMessageBytes    = 4096
	maxTerminationMessageLogLines = 80
	maxTerminationMessageLogBytes = 2048
)

// makeTerminationMessageFile creates an empty file for one instance of the container and returns
// its name. The file is 0666 because the container may run as any user and it is the only way out
// for the message; the folders above it keep their modes, so other users of the host cannot reach it.
func (m *Manager) makeTerminationMessageFile(pod *v1.Pod, c *v1.Container) (name, hostPath string, err error) {
	dir, err := podpath.ContainerDir(m.RootDir, pod.UID, c.Name)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", "", err
	}
	for range 3 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", "", err
		}
		name = hex.EncodeToString(b[:])
		hostPath = filepath.Join(dir, name)
		f, err := os.OpenFile(hostPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o666)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		// The mode passed the umask on the way in.
		err = f.Chmod(0o666)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(hostPath)
			return "", "", err
		}
		return name, hostPath, nil
	}
	return "", "", fmt.Errorf("termination message file in %s: names keep colliding", dir)
}

// terminationMessageMount mounts a fresh termination message file at the container's
// terminationMessagePath and returns the annotation that finds it again. As with the kubelet, a
// file that cannot be made costs the container its message, not its start.
func (m *Manager) terminationMessageMount(pod *v1.Pod, c *v1.Container) (*runtimeapi.Mount, string) {
	if m.RootDir == "" || c.TerminationMessagePath == "" {
		return nil, ""
	}
	name, host, err := m.makeTerminationMessageFile(pod, c)
	if err != nil {
		m.Log.Warn("termination message file", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "err", err)
		return nil, ""
	}
	return &runtimeapi.Mount{ContainerPath: c.TerminationMessagePath, HostPath: host}, name
}

// removeTerminationMessageFile drops the file of an instance the runtime never created.
func (m *Manager) removeTerminationMessageFile(pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) {
	name := cfg.GetAnnotations()[AnnotationTerminationMessageFile]
	if name == "" {
		return
	}
	if p, err := podpath.TerminationMessageFile(m.RootDir, pod.UID, c.Name, name); err == nil {
		os.Remove(p)
	}
}

// terminationMessageHostPath finds the host file of an exited container: by the annotation's file
// name, else (a container another agent created) by the mount at the message path, accepted only
// inside the container's own folder.
func (m *Manager) terminationMessageHostPath(s *runtimeapi.ContainerStatus, info labeledInfo, containerPath string) (string, bool) {
	if m.RootDir == "" {
		return "", false
	}
	if name := s.GetAnnotations()[AnnotationTerminationMessageFile]; name != "" {
		p, err := podpath.TerminationMessageFile(m.RootDir, info.PodUID, info.ContainerName, name)
		return p, err == nil
	}
	dir, err := podpath.ContainerDir(m.RootDir, info.PodUID, info.ContainerName)
	if err != nil {
		return "", false
	}
	for _, mnt := range s.GetMounts() {
		if mnt.GetContainerPath() == containerPath && filepath.Dir(mnt.GetHostPath()) == dir &&
			podpath.Element("termination message file", filepath.Base(mnt.GetHostPath())) == nil {
			return mnt.GetHostPath(), true
		}
	}
	return "", false
}

// terminationMessage is what an exited container leaves in state.terminated.message: its
// termination message file, or with FallbackToLogsOnError, a failed exit and nothing in the file,
// the end of its log.
func (m *Manager) terminationMessage(ctx context.Context, s *runtimeapi.ContainerStatus, info labeledInfo) string {
	a := s.GetAnnotations()
	fallback := v1.TerminationMessagePolicy(a[AnnotationTerminationMsgPolicy]) == v1.TerminationMessageFallbackToLogsOnError &&
		s.ExitCode != 0 && s.Reason != "ContainerCannotRun"
	path := a[AnnotationTerminationMessagePath]
	if path != "" {
		if host, ok := m.terminationMessageHostPath(s, info, path); ok {
			data, err := regularfile.ReadTail(host, maxTerminationMessageBytes)
			switch {
			case errors.Is(err, os.ErrNotExist):
			case err != nil:
				// The host path stays out of the pod's status.
				var pe *os.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return "Error on reading termination log: " + err.Error()
			case len(data) > 0 || !fallback:
				return string(data)
			}
		}
	}
	if !fallback {
		return ""
	}
	return m.logTail(ctx, s, info)
}

// logTail is the end of the container's log as the kubelet's fallback reads it.
func (m *Manager) logTail(ctx context.Context, s *runtimeapi.ContainerStatus, info labeledInfo) string {
	p := s.GetLogPath()
	if p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		// Some runtimes report the path as the agent sent it, relative to the pod's log folder.
		dir, err := podpath.LogDir(m.PodLogsDir, info.PodNamespace, info.PodName, info.PodUID)
		if err != nil {
			return ""
		}
		p = filepath.Join(dir, p)
	}
	r := &lastBytes{max: maxTerminationMessageLogBytes}
	if err := logs.ReadLogs(ctx, p, logs.Options{TailLines: maxTerminationMessageLogLines}, r); err != nil {
		return fmt.Sprintf("Error on reading termination message from logs: %v", err)
	}
	return string(r.buf)
}

// lastBytes keeps the last max bytes written to it.
type lastBytes struct {
	max int
	buf []byte
}

func (l *lastBytes) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) >= l.max {
		l.buf = append(l.buf[:0], p[len(p)-l.max:]...)
		return n, nil
	}
	if drop := len(l.buf) + len(p) - l.max; drop > 0 {
		l.buf = append(l.buf[:0], l.buf[drop:]...)
	}
	l.buf = append(l.buf, p...)
	return n, nil
}
