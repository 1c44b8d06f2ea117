// Package engine is the runtime's sandbox and container lifecycle: the records and registries of
// sandboxes and containers (sandbox_state.go and container_state.go open with their state
// machines), their recovery and the sweep of what a crash left after a restart (Recover, sweep.go),
// pod namespaces, cgroups and files, OCI bundles and conmon-monitored containers, exits and events,
// stats, and the exec/attach/port-forward sessions of the streaming server. It validates the
// sandbox and container configs it is given, as it is what turns them into names, paths and
// sysctls. Its methods take and return plain values and CRI messages; it knows nothing of gRPC,
// which is runtime/cri's, the edge in front of it.
package engine

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/store"
)

// Handler is one OCI runtime a pod can ask for through RunPodSandboxRequest.runtime_handler.
type Handler struct {
	Name string // the CRI runtime_handler name; "" selects Config.DefaultHandler
	Path string // the OCI runtime binary (runc, crun, runsc)
	// Root is the runtime's own state dir (its --root), under Config.State so two daemons
	// never see each other's containers.
	Root string
	// Args are extra global arguments for the binary (e.g. runsc's --platform=kvm).
	Args []string
}

// Config is everything an engine is made of. Paths are absolute.
type Config struct {
	Root  string // persistent state: metadata, container dirs
	State string // volatile state: namespace pins, sockets, exit files
	// Handlers by name; DefaultHandler names the one used when a pod asks for none.
	Handlers       map[string]Handler
	DefaultHandler string
	ConmonPath     string
	CatatonitPath  string
	// ContainerLogMaxSize caps each container's log file through conmon (0: no cap).
	ContainerLogMaxSize int64
	// CgroupParent is used for sandboxes whose config names none.
	CgroupParent string
	Images       RootfsProvider
	Network      NetworkPlugin // nil: pods get loopback only
	// StreamingAddr is where the exec/attach/port-forward server listens; "" means 127.0.0.1 on a
	// free port, so streams are reachable only from this machine unless asked otherwise.
	StreamingAddr string
	// StreamingTLS makes the streaming server speak HTTPS; without it the server listens on
	// loopback only.
	StreamingTLS *tls.Config
	Logger       *slog.Logger
	// CreateTimeout bounds each RunSandbox and CreateContainer whose caller set no shorter
	// deadline; 0 means DefaultCreateTimeout.
	CreateTimeout time.Duration
	// Devices injects the CDI devices a container names into its spec; nil refuses any.
	Devices DeviceInjector
}

// DeviceInjector adds the CDI devices a container config names to its OCI spec (*cdi.Injector).
type DeviceInjector interface {
	InjectContainer(spec *specs.Spec, cfg *runtimeapi.ContainerConfig) error
}

// Engine carries out the RuntimeService's calls. It holds the sandbox and container records
// (registries and stores); the rest of their state (locks, namespace pins, the OCI runtimes, exit
// watching) is their managers'.
type Engine struct {
	cfg Config
	log *slog.Logger

	sandboxes   *store.Registry[*store.Sandbox]
	containers  *store.Registry[*store.Container]
	sandboxDB   *store.Dir[store.Sandbox]
	containerDB *store.Dir[store.Container]

	sb     sandboxManager
	ctr    containerManager
	stream streamingState
}

// New builds the engine: its dirs, record stores and managers, and the streaming server, which
// listens at once so that a bad StreamingAddr fails the daemon before it serves rather than at the
// first exec. It looks at no sandbox or container yet: Recover does, before CRI is served.
func New(cfg Config) (*Engine, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = DefaultCreateTimeout
	}
	if cfg.Root == "" || cfg.State == "" {
		return nil, fmt.Errorf("runtime: root and state dirs are required")
	}
	if _, ok := cfg.Handlers[cfg.DefaultHandler]; !ok {
		return nil, fmt.Errorf("runtime: default handler %q is not configured", cfg.DefaultHandler)
	}
	for _, d := range []string{cfg.Root, cfg.State} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return nil, err
		}
	}
	s := &Engine{
		cfg:        cfg,
		log:        cfg.Logger,
		sandboxes:  store.NewRegistry[*store.Sandbox](),
		containers: store.NewRegistry[*store.Container](),
	}
	var err error
	if s.sandboxDB, err = store.OpenDir[store.Sandbox](filepath.Join(cfg.Root, "sandboxes")); err != nil {
		return nil, err
	}
	if s.containerDB, err = store.OpenDir[store.Container](filepath.Join(cfg.Root, "containers")); err != nil {
		return nil, err
	}
	if err := s.initSandboxManager(); err != nil {
		return nil, err
	}
	if err := s.initContainerManager(); err != nil {
		return nil, err
	}
	if _, err := s.StreamingServer(); err != nil {
		return nil, fmt.Errorf("streaming: %w", err)
	}
	return s, nil
}

// Recover rebuilds the engine's view of sandboxes and containers from disk and from the OCI
// runtimes, so a daemon restarted after SIGKILL finds everything that kept running, and removes
// what creates and removes cut short left behind. It asks the OCI runtimes, kills orphaned
// processes and removes their cgroups, so it runs once, before CRI is served.
func (s *Engine) Recover(ctx context.Context) error {
	warnKnownEscapes(ctx, s.cfg.Handlers, s.log)
	// Sandboxes first: containers are attached to them on recovery.
	if err := s.recoverSandboxes(ctx); err != nil {
		return fmt.Errorf("recover sandboxes: %w", err)
	}
	if err := s.recoverContainers(ctx); err != nil {
		return fmt.Errorf("recover containers: %w", err)
	}
	s.sweepOrphans(ctx)
	return nil
}

// Close stops background work; containers keep running under conmon.
func (s *Engine) Close() error {
	s.CloseContainers()
	return s.closeStreaming()
}
