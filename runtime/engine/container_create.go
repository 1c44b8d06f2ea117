package engine

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

	"github.com/nodelet/nodelet/runtime/cdi"
	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/imagestore"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

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

// undoStack holds the undo of each step a create has done, so a failure takes them back newest
// first.
type undoStack []func()

func (u *undoStack) push(f func()) { *u = append(*u, f) }

func (u undoStack) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// CreateContainer makes a container from cfg in sandbox sandboxID, in the CREATED state, and
// returns its ID; sandboxCfg is the sandbox's config as the caller knows it, used only when the
// sandbox's record has none. cfg is validated here, by the code that turns it into paths. The
// work ends with the caller's context: a client that gives up (or Config.CreateTimeout) fails the
// create, and every step done is undone, newest first, before the name is released, so a retry of
// the same name finds it free.
func (s *Engine) CreateContainer(ctx context.Context, sandboxID string, cfg *runtimeapi.ContainerConfig, sandboxCfg *runtimeapi.PodSandboxConfig) (_ string, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
	defer cancel()
	if err := validateContainerConfig(cfg); err != nil {
		return "", err
	}
	sb, err := s.sandboxes.Get(sandboxID)
	if err != nil {
		return "", fmt.Errorf("sandbox %q: %w", sandboxID, err)
	}
	// Held until the container is registered or undone, so a Stop or Remove of the pod either
	// comes first (and this create fails in joinSandbox) or waits and then finds the container.
	unlockSandbox := s.sb.rlock(sb.ID)
	defer unlockSandbox()

	cc := &containerCreate{s: s, ctx: ctx, sandboxID: sandboxID, cfg: cfg, askedSbCfg: sandboxCfg, sb: sb}
	defer func() {
		if retErr != nil {
			cc.undo.run()
		}
	}()
	// Each step that makes something pushes its undo onto cc.undo.
	err = s.runSteps(ctx, "create container", func() string { return cc.id }, []step{
		{"joinSandbox", cc.joinSandbox},
		{"resolveRuntime", cc.resolveRuntime},
		{"reserveName", cc.reserveName},
		{"prepareRootfs", cc.prepareRootfs},
		{"makeBundle", cc.makeBundle},
		{"idmapRootfs", cc.idmapRootfs},
		{"placeLogs", cc.placeLogs},
		{"placeCgroup", cc.placeCgroup},
		{"prepareImageVolumes", cc.prepareImageVolumes},
		{"idmapMounts", cc.idmapMounts},
		{"writeSpec", cc.writeSpec},
		{"recordCreating", cc.recordCreating},
		{"createUnderConmon", cc.createUnderConmon},
		{"detachIdmappedClones", cc.detachIdmappedClones},
		{"recordCreated", cc.recordCreated},
	})
	if err != nil {
		return "", err
	}
	s.containers.Add(cc.id, cc.c)
	s.ctr.events.publish(cc.id, cc.sb.ID, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	return cc.id, nil
}

// containerCreate is one CreateContainer in progress: what its steps have made so far, and in
// undo how to take each back.
type containerCreate struct {
	s          *Engine
	ctx        context.Context
	sandboxID  string // as the caller named it (an ID or a unique prefix)
	cfg        *runtimeapi.ContainerConfig
	askedSbCfg *runtimeapi.PodSandboxConfig

	sb    *store.Sandbox
	sbCfg *runtimeapi.PodSandboxConfig
	rt    *oci.Runtime

	id, name   string
	rootfs     *imagestore.Rootfs
	bundle     string
	logPath    string // "" when the kubelet asked for no log
	monitorLog string
	cgroupPath string
	// specCfg is what the spec is built from: cfg, or a copy with image volumes as binds.
	specCfg   *runtimeapi.ContainerConfig
	imageVols []string
	spec      *specs.Spec
	c         *store.Container
	mon       *oci.Monitor
	pid       int // of the container's init

	undo undoStack
}

// joinSandbox checks, under the sandbox's lock, that the sandbox is still there and ready.
func (cc *containerCreate) joinSandbox() error {
	sb, err := cc.s.sandboxes.Get(cc.sb.ID)
	if err != nil {
		return fmt.Errorf("sandbox %s was removed: %w", cc.sandboxID, err)
	}
	cc.sb = sb
	if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return fmt.Errorf("sandbox %s is not ready: %w", sb.ID, errdefs.ErrFailedPrecondition)
	}
	cc.sbCfg = sb.Config
	if cc.sbCfg == nil {
		cc.sbCfg = cc.askedSbCfg
	}
	return nil
}

func (cc *containerCreate) resolveRuntime() (err error) {
	cc.rt, err = cc.s.ctr.runtimeFor(cc.sb.Handler)
	return err
}

func (cc *containerCreate) reserveName() error {
	cc.id = store.NewID()
	md, pod := cc.cfg.GetMetadata(), cc.sbCfg.GetMetadata()
	cc.name = strings.Join([]string{md.GetName(), pod.GetName(), pod.GetNamespace(), pod.GetUid(), fmt.Sprint(md.GetAttempt())}, "_")
	if err := cc.s.containers.ReserveName(cc.name, cc.id); err != nil {
		return err
	}
	cc.undo.push(func() { cc.s.containers.ReleaseName(cc.name, cc.id) })
	return nil
}

func (cc *containerCreate) prepareRootfs() error {
	s := cc.s
	if s.cfg.Images == nil {
		return fmt.Errorf("no image store configured: %w", errdefs.ErrUnavailable)
	}
	image := cc.cfg.GetImage().GetImage()
	rootfs, err := s.cfg.Images.PrepareRootfs(cc.ctx, cc.id, image)
	if err != nil {
		return fmt.Errorf("rootfs from image %q: %w", image, err)
	}
	cc.rootfs = rootfs
	cc.undo.push(func() {
		rctx, cancel := rollbackCtx(cc.ctx)
		defer cancel()
		s.undo("remove rootfs", s.cfg.Images.RemoveRootfs(rctx, cc.id))
	})
	return nil
}

func (cc *containerCreate) makeBundle() error {
	cc.bundle = filepath.Join(cc.s.cfg.Root, "containers", cc.id)
	if err := os.MkdirAll(cc.bundle, 0o700); err != nil {
		return err
	}
	cc.undo.push(func() { cc.s.undo("remove bundle", os.RemoveAll(cc.bundle)) })
	return nil
}

// idmapRootfs maps the rootfs into the pod's user namespace, when it has one.
func (cc *containerCreate) idmapRootfs() error {
	if cc.sb.UserNSPath == "" {
		return nil
	}
	return cc.s.idmapRootfs(cc.id, cc.sb.UserNSPath, cc.sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions())
}

// placeLogs makes the container's log dir; conmon logs into the bundle when there is none.
func (cc *containerCreate) placeLogs() error {
	if dir := cc.sbCfg.GetLogDirectory(); dir != "" && cc.cfg.GetLogPath() != "" {
		cc.logPath = filepath.Join(dir, cc.cfg.GetLogPath())
		if err := privateLogDir(filepath.Dir(cc.logPath)); err != nil {
			return fmt.Errorf("log dir: %w", err)
		}
	}
	cc.monitorLog = cc.logPath
	if cc.monitorLog == "" {
		cc.monitorLog = filepath.Join(cc.bundle, "ctr.log") // conmon must log somewhere
	}
	return nil
}

// placeCgroup names the container's cgroup, under its pod's.
func (cc *containerCreate) placeCgroup() error {
	parent := cc.sb.CgroupParent
	if parent == "" {
		parent = cc.s.sb.daemonCgroupParent()
	}
	cc.cgroupPath = filepath.Join(parent, containerCgroupPrefix+cc.id)
	return nil
}

// prepareImageVolumes makes image volumes read-only binds of rootfs the image store makes; the
// spec is built from a copy of the request holding those binds, the record keeps the request as
// it came.
func (cc *containerCreate) prepareImageVolumes() error {
	s := cc.s
	cc.specCfg = cc.cfg
	for _, m := range cc.cfg.GetMounts() {
		if m.GetImage().GetImage() != "" {
			mounts, vols, err := s.prepareImageVolumes(cc.ctx, cc.id, cc.cfg.GetMounts())
			if err != nil {
				return err
			}
			cc.imageVols = vols
			cc.specCfg = proto.Clone(cc.cfg).(*runtimeapi.ContainerConfig)
			cc.specCfg.Mounts = mounts
			break
		}
	}
	cc.undo.push(func() {
		rctx, cancel := rollbackCtx(cc.ctx)
		defer cancel()
		s.undo("remove image volumes", s.removeImageVolumes(rctx, cc.imageVols))
	})
	return nil
}

// writeSpec generates the OCI spec and writes it into the bundle.
func (cc *containerCreate) writeSpec() error {
	s, sb := cc.s, cc.sb
	targetPIDNS, err := s.targetPIDNamespace(cc.cfg, sb.ID)
	if err != nil {
		return err
	}
	gvisor, err := cc.gvisorPlacement()
	if err != nil {
		return err
	}
	spec, err := oci.Generate(oci.SpecInput{
		ID: cc.id, Config: cc.specCfg, Sandbox: cc.sbCfg, Rootfs: cc.rootfs.Path, Image: cc.rootfs.Config,
		NetNSPath: sb.NetNSPath, IPCNSPath: sb.IPCNSPath, UTSNSPath: sb.UTSNSPath, PIDNSPath: sb.PIDNSPath, UserNSPath: sb.UserNSPath,
		TargetPIDNSPath: targetPIDNS, ShmPath: sb.ShmPath, SandboxDir: sb.Dir, CgroupsPath: cc.cgroupPath, MinOOMScoreAdj: s.ctr.minOOM,
		Gvisor: gvisor,
	})
	if err != nil {
		return err
	}
	if err := s.injectDevices(spec, cc.cfg, gvisor != nil); err != nil {
		return err
	}
	cc.spec = spec
	return oci.WriteBundle(cc.bundle, spec)
}

// injectDevices adds the CDI devices the container names. gVisor's sandbox has no host device
// nodes to give, so a runsc container naming one is refused rather than started without it.
func (s *Engine) injectDevices(spec *specs.Spec, cfg *runtimeapi.ContainerConfig, gvisor bool) error {
	devices, err := cdi.Devices(cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
	}
	if len(devices) == 0 {
		return nil
	}
	if gvisor {
		return fmt.Errorf("CDI devices %v: the runsc handler cannot give containers host devices: %w", devices, errdefs.ErrInvalidArgument)
	}
	if s.cfg.Devices == nil {
		return fmt.Errorf("CDI devices %v: no CDI spec folders are configured (--cdi-spec-dirs): %w", devices, errdefs.ErrInvalidArgument)
	}
	if err := s.cfg.Devices.InjectContainer(spec, cfg); err != nil {
		return fmt.Errorf("%w: %w", errdefs.ErrInvalidArgument, err)
	}
	return nil
}

// recordCreating persists the container's record, marked Creating. The record goes to disk
// before conmon runs, marked Creating until the runtime holds the container: a daemon killed in
// between finds it on restart and undoes the create, instead of leaving an unknown container.
func (cc *containerCreate) recordCreating() error {
	cfg := cc.cfg
	stopSignal := cc.rootfs.Config.StopSignal
	if sig := cfg.GetStopSignal(); sig != runtimeapi.Signal_RUNTIME_DEFAULT {
		stopSignal = sig.String()
	}
	cc.c = &store.Container{
		ID: cc.id, Name: cc.name, SandboxID: cc.sb.ID, Config: cfg, CreatedAt: time.Now().UnixNano(), Handler: cc.sb.Handler,
		Image: cfg.GetImage().GetImage(), ImageID: cc.rootfs.ImageID, ImageRef: cc.rootfs.ImageRef,
		Bundle: cc.bundle, Rootfs: cc.rootfs.Path, UpperDir: cc.rootfs.UpperDir, ImageVolumes: cc.imageVols, LogPath: cc.logPath, CgroupPath: cc.cgroupPath, StopSignal: stopSignal,
		User: containerUser(cc.spec.Process.User), Creating: true,
		Status: store.ContainerStatus{
			State:     runtimeapi.ContainerState_CONTAINER_CREATED,
			Resources: oci.InForce(cfg.GetLinux().GetResources(), cc.spec.Linux.Resources),
		},
	}
	if err := cc.s.containerDB.Put(cc.id, cc.c); err != nil {
		return err
	}
	cc.undo.push(func() { cc.s.undo("delete record", cc.s.containerDB.Delete(cc.id)) })
	return nil
}

// createUnderConmon has conmon run `runtime create`.
func (cc *containerCreate) createUnderConmon() error {
	s, cfg := cc.s, cc.cfg
	cc.mon = &oci.Monitor{
		ConmonPath: s.cfg.ConmonPath, Runtime: cc.rt, ID: cc.id, Bundle: cc.bundle, LogPath: cc.monitorLog,
		ExitDir: s.ctr.exitDir, Stdin: cfg.GetStdin(), StdinOnce: cfg.GetStdinOnce(), Tty: cfg.GetTty(),
		LogSizeMax: s.cfg.ContainerLogMaxSize,
	}
	// From here the runtime may hold the container: kill the monitor and a runtime call hung
	// under it (both name the bundle; a hung `runtime create` would outlive its monitor), undo
	// through the runtime, and drop the exit file the killed monitor may leave.
	cc.undo.push(func() {
		cc.mon.KillConmon()
		killProcessesMentioning(cc.bundle)
		rctx, cancel := rollbackCtx(cc.ctx)
		defer cancel()
		s.undo("delete from runtime", cc.rt.Delete(rctx, cc.id))
		if err := os.Remove(filepath.Join(s.ctr.exitDir, cc.id)); err != nil && !os.IsNotExist(err) {
			s.undo("remove exit file", err)
		}
	})
	if cc.sb.Gvisor {
		if err := oci.MakeStartGate(cc.bundle); err != nil {
			return err
		}
	}
	var err error
	cc.pid, err = cc.mon.Create(cc.ctx)
	return err
}

// recordCreated persists that the runtime now holds the container.
func (cc *containerCreate) recordCreated() error {
	c := cc.c
	c.Lock()
	defer c.Unlock()
	c.Status.Pid = cc.pid
	c.Status.ConmonPid = oci.ConmonPIDOf(cc.bundle)
	c.Creating = false
	return cc.s.containerDB.Put(cc.id, c)
}

// targetPIDNamespace finds the PID namespace a debug container asks to share (kubectl debug
// --target): that of a running container of the same pod.
func (s *Engine) targetPIDNamespace(cfg *runtimeapi.ContainerConfig, sandboxID string) (string, error) {
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
	if name == "" || name == "." || len(name) > maxCtrNameLen || strings.ContainsAny(name, "/\\\x00") || strings.Contains(name, "..") {
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
	// The log path names a file in the sandbox's log directory: "." (or "a/..") would name the
	// directory itself.
	if lp := cfg.GetLogPath(); lp != "" && (filepath.IsAbs(lp) || ctrHasDotDot(lp) || filepath.Clean(lp) == "." || len(lp) > 1024) {
		return bad("container %q: log path %q must name a file in the log directory", name, lp)
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
