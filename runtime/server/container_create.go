package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// runscDefaultArgs: gVisor under conmon. Its own cgroup handling does not match the pod cgroups
// made through cgroupfs, so the host's runtime leaves cgroups to the pod; the network is the pod's
// namespace, used through the host stack.
var runscDefaultArgs = []string{"--ignore-cgroups", "--network=host"}

// Limits on what one CreateContainer may ask for; far above real pods, far below what would hurt.
const (
	maxCtrNameLen       = 253
	maxCtrArgBytes      = 1 << 20
	maxCtrEnvs          = 10000
	maxCtrMounts        = 1000
	maxCtrDevices       = 1000
	maxCtrMetadataBytes = 256 << 10
)

// DefaultCreateTimeout bounds a whole CreateContainer or RunPodSandbox whose client set no
// shorter deadline: a step that hangs (a wedged runtime, a CNI plugin, a stuck mount) fails the
// call and its rollback frees the name, instead of holding both for ever. It is twice the
// kubelet's default runtime request timeout.
const DefaultCreateTimeout = 4 * time.Minute

// rollbackTimeout bounds each undo of a failed create. It runs on a context of its own: the
// client's may be what ended the create.
const rollbackTimeout = time.Minute

// rollbackCtx is the context an undo runs with, detached from the caller's cancellation.
func rollbackCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
}

// CreateContainer makes a container in the CREATED state. The work ends with the client's call:
// a client that gives up (or Config.CreateTimeout) fails the create, and every step done is undone,
// newest first, before the name is released, so a retry of the same name finds it free.
func (s *Server) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (_ *runtimeapi.CreateContainerResponse, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
	defer cancel()
	cfg := req.GetConfig()
	if err := validateContainerConfig(cfg); err != nil {
		return nil, err
	}
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: %w", req.GetPodSandboxId(), err)
	}
	// Held until the container is registered or undone, so a Stop or Remove of the pod either
	// comes first (and this create fails below) or waits and then finds the container.
	unlockSandbox := s.rlockSandbox(sb.ID)
	defer unlockSandbox()
	if sb, err = s.sandboxes.Get(sb.ID); err != nil {
		return nil, fmt.Errorf("sandbox %s was removed: %w", req.GetPodSandboxId(), err)
	}
	if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, fmt.Errorf("sandbox %s is not ready: %w", sb.ID, errdefs.ErrFailedPrecondition)
	}
	sbCfg := sb.Config
	if sbCfg == nil {
		sbCfg = req.GetSandboxConfig()
	}
	rt, err := s.runtimeFor(sb.Handler)
	if err != nil {
		return nil, err
	}

	id := store.NewID()
	md := cfg.GetMetadata()
	name := strings.Join([]string{md.GetName(), sbCfg.GetMetadata().GetName(), sbCfg.GetMetadata().GetNamespace(),
		sbCfg.GetMetadata().GetUid(), fmt.Sprint(md.GetAttempt())}, "_")
	if err := s.containers.ReserveName(name, id); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.containers.ReleaseName(name, id)
		}
	}()

	if s.cfg.Images == nil {
		return nil, fmt.Errorf("no image store configured: %w", errdefs.ErrUnavailable)
	}
	rootfs, err := s.cfg.Images.PrepareRootfs(ctx, id, cfg.GetImage().GetImage())
	if err != nil {
		return nil, fmt.Errorf("rootfs from image %q: %w", cfg.GetImage().GetImage(), err)
	}
	defer func() {
		if retErr != nil {
			rctx, cancel := rollbackCtx(ctx)
			defer cancel()
			s.undo("remove rootfs", s.cfg.Images.RemoveRootfs(rctx, id))
		}
	}()

	bundle := filepath.Join(s.cfg.Root, "containers", id)
	if err := os.MkdirAll(bundle, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.undo("remove bundle", os.RemoveAll(bundle))
		}
	}()
	rootPath := rootfs.Path
	if sb.UserNSPath != "" {
		if err := s.idmapRootfs(id, sb.UserNSPath, sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()); err != nil {
			return nil, err
		}
	}

	logPath := ""
	if dir := sbCfg.GetLogDirectory(); dir != "" && cfg.GetLogPath() != "" {
		logPath = filepath.Join(dir, cfg.GetLogPath())
		if err := privateLogDir(filepath.Dir(logPath)); err != nil {
			return nil, fmt.Errorf("log dir: %w", err)
		}
	}
	monitorLog := logPath
	if monitorLog == "" {
		monitorLog = filepath.Join(bundle, "ctr.log") // conmon must log somewhere
	}

	parent := sb.CgroupParent
	if parent == "" {
		parent = s.cfg.CgroupParent
	}
	if parent == "" {
		parent = "/nodelet"
	}
	cgroupPath := filepath.Join(parent, containerCgroupPrefix+id)

	// Image volumes become read-only binds of rootfs the image store makes; the spec is built
	// from a copy of the request holding those binds, the record keeps the request as it came.
	specCfg := cfg
	var imageVols []string
	for _, m := range cfg.GetMounts() {
		if m.GetImage().GetImage() != "" {
			var mounts []*runtimeapi.Mount
			if mounts, imageVols, err = s.prepareImageVolumes(ctx, id, cfg.GetMounts()); err != nil {
				return nil, err
			}
			specCfg = proto.Clone(cfg).(*runtimeapi.ContainerConfig)
			specCfg.Mounts = mounts
			break
		}
	}
	defer func() {
		if retErr != nil {
			rctx, cancel := rollbackCtx(ctx)
			defer cancel()
			s.undo("remove image volumes", s.removeImageVolumes(rctx, imageVols))
		}
	}()

	targetPIDNS, err := s.targetPIDNamespace(cfg, sb.ID)
	if err != nil {
		return nil, err
	}
	spec, err := oci.Generate(oci.SpecInput{
		ID: id, Config: specCfg, Sandbox: sbCfg, Rootfs: rootPath, Image: rootfs.Config,
		NetNSPath: sb.NetNSPath, IPCNSPath: sb.IPCNSPath, UTSNSPath: sb.UTSNSPath, PIDNSPath: sb.PIDNSPath, UserNSPath: sb.UserNSPath,
		TargetPIDNSPath: targetPIDNS, ShmPath: sb.ShmPath, SandboxDir: sb.Dir, CgroupsPath: cgroupPath, MinOOMScoreAdj: s.ctr.minOOM,
	})
	if err != nil {
		return nil, err
	}
	if err := oci.WriteBundle(bundle, spec); err != nil {
		return nil, err
	}

	stopSignal := rootfs.Config.StopSignal
	if sig := cfg.GetStopSignal(); sig != runtimeapi.Signal_RUNTIME_DEFAULT {
		stopSignal = sig.String()
	}
	c := &store.Container{
		ID: id, Name: name, SandboxID: sb.ID, Config: cfg, CreatedAt: time.Now().UnixNano(), Handler: sb.Handler,
		Image: cfg.GetImage().GetImage(), ImageID: rootfs.ImageID, ImageRef: rootfs.ImageRef,
		Bundle: bundle, Rootfs: rootPath, ImageVolumes: imageVols, LogPath: logPath, CgroupPath: cgroupPath, StopSignal: stopSignal,
		User: containerUser(spec.Process.User), Creating: true,
		Status: store.ContainerStatus{
			State:     runtimeapi.ContainerState_CONTAINER_CREATED,
			Resources: cfg.GetLinux().GetResources(),
		},
	}
	// The record goes to disk before conmon runs, marked Creating until the runtime holds the
	// container: a daemon killed in between finds it on restart and undoes the create, instead
	// of leaving an unknown container.
	if err := s.containerDB.Put(id, c); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.undo("delete record", s.containerDB.Delete(id))
		}
	}()

	mon := &oci.Monitor{
		ConmonPath: s.cfg.ConmonPath, Runtime: rt, ID: id, Bundle: bundle, LogPath: monitorLog,
		ExitDir: s.ctr.exitDir, Stdin: cfg.GetStdin(), StdinOnce: cfg.GetStdinOnce(), Tty: cfg.GetTty(),
		LogSizeMax: s.cfg.ContainerLogMaxSize,
	}
	// From here the runtime may hold the container: kill the monitor and a runtime call hung
	// under it (both name the bundle; a hung `runtime create` would outlive its monitor), undo
	// through the runtime, and drop the exit file the killed monitor may leave.
	defer func() {
		if retErr != nil {
			mon.KillConmon()
			killProcessesMentioning(bundle)
			rctx, cancel := rollbackCtx(ctx)
			defer cancel()
			s.undo("delete from runtime", rt.Delete(rctx, id))
			if err := os.Remove(filepath.Join(s.ctr.exitDir, id)); err != nil && !os.IsNotExist(err) {
				s.undo("remove exit file", err)
			}
		}
	}()
	pid, err := mon.Create(ctx)
	if err != nil {
		return nil, err
	}
	c.Lock()
	c.Status.Pid = pid
	c.Status.ConmonPid = oci.ConmonPIDOf(bundle)
	c.Creating = false
	err = s.containerDB.Put(id, c)
	c.Unlock()
	if err != nil {
		return nil, err
	}
	s.containers.Add(id, c)
	s.ctr.events.publish(id, sb.ID, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

// targetPIDNamespace finds the PID namespace a debug container asks to share (kubectl debug
// --target): that of a running container of the same pod.
func (s *Server) targetPIDNamespace(cfg *runtimeapi.ContainerConfig, sandboxID string) (string, error) {
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET {
		return "", nil
	}
	t, err := s.containers.Get(ns.GetTargetId())
	if err != nil {
		return "", fmt.Errorf("target container %q: %w", ns.GetTargetId(), err)
	}
	st := t.Snapshot()
	if t.SandboxID != sandboxID || st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.Pid <= 0 {
		return "", fmt.Errorf("target container %q is not running in this pod: %w", ns.GetTargetId(), errdefs.ErrFailedPrecondition)
	}
	return fmt.Sprintf("/proc/%d/ns/pid", st.Pid), nil
}

func containerUser(u specs.User) *runtimeapi.ContainerUser {
	lu := &runtimeapi.LinuxContainerUser{Uid: int64(u.UID), Gid: int64(u.GID)}
	for _, g := range u.AdditionalGids {
		lu.SupplementalGroups = append(lu.SupplementalGroups, int64(g))
	}
	return &runtimeapi.ContainerUser{Linux: lu}
}

// validateContainerConfig refuses requests that could escape their dirs or cost the daemon more
// than a real pod ever would.
func validateContainerConfig(cfg *runtimeapi.ContainerConfig) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf(format+": %w", append(a, errdefs.ErrInvalidArgument)...)
	}
	if cfg == nil || cfg.GetMetadata() == nil {
		return bad("container config and metadata are required")
	}
	name := cfg.GetMetadata().GetName()
	if name == "" || len(name) > maxCtrNameLen || strings.ContainsAny(name, "/\x00") || strings.Contains(name, "..") {
		return bad("container name %q", name)
	}
	if cfg.GetImage().GetImage() == "" {
		return bad("container %q: image is required", name)
	}
	n := 0
	for _, a := range append(append([]string(nil), cfg.GetCommand()...), cfg.GetArgs()...) {
		n += len(a)
		if strings.ContainsRune(a, 0) {
			return bad("container %q: NUL in command", name)
		}
	}
	if n > maxCtrArgBytes {
		return bad("container %q: command and args are %d bytes", name, n)
	}
	if len(cfg.GetEnvs()) > maxCtrEnvs {
		return bad("container %q: %d env vars", name, len(cfg.GetEnvs()))
	}
	for _, e := range cfg.GetEnvs() {
		if e.GetKey() == "" || strings.ContainsAny(e.GetKey(), "=\x00") || strings.ContainsRune(string(e.GetValue()), 0) {
			return bad("container %q: env var %q", name, e.GetKey())
		}
	}
	if len(cfg.GetMounts()) > maxCtrMounts || len(cfg.GetDevices()) > maxCtrDevices {
		return bad("container %q: too many mounts or devices", name)
	}
	meta := 0
	for k, v := range cfg.GetLabels() {
		meta += len(k) + len(v)
	}
	for k, v := range cfg.GetAnnotations() {
		meta += len(k) + len(v)
	}
	if meta > maxCtrMetadataBytes {
		return bad("container %q: labels and annotations are %d bytes", name, meta)
	}
	if lp := cfg.GetLogPath(); lp != "" && (filepath.IsAbs(lp) || ctrHasDotDot(lp) || len(lp) > 1024) {
		return bad("container %q: log path %q must be relative and stay in the log directory", name, lp)
	}
	if wd := cfg.GetWorkingDir(); wd != "" && !filepath.IsAbs(wd) {
		return bad("container %q: working dir %q must be absolute", name, wd)
	}
	return nil
}

func ctrHasDotDot(p string) bool {
	for _, part := range strings.Split(filepath.ToSlash(p), "/") {
		if part == ".." {
			return true
		}
	}
	return false
}
