package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeMachine has the named binaries installed, as empty executable files under dir.
func fakeMachine(t *testing.T, names ...string) func(string) string {
	t.Helper()
	dir := t.TempDir()
	have := map[string]string{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
		have[n] = p
	}
	return func(name string) string { return have[name] }
}

func TestResolveDefaults(t *testing.T) {
	look := fakeMachine(t, "runc", "runsc", "conmon", "catatonit")
	cfg, err := Defaults().resolve("/var/lib/nodelet", "/run/nodelet", nil, look)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Engine
	for _, c := range []struct{ name, got, want string }{
		{"listen", cfg.Listen, "unix:///run/nodelet/runtime.sock"},
		{"root", s.Root, "/var/lib/nodelet/runtime"},
		{"state", s.State, "/run/nodelet/runtime"},
		{"images", cfg.ImageDir, "/var/lib/nodelet/runtime/images"},
		{"default handler", s.DefaultHandler, "runc"},
		{"cgroup parent", s.CgroupParent, "/nodelet"},
		{"streaming", s.StreamingAddr, "127.0.0.1:0"},
		{"conmon", s.ConmonPath, look("conmon")},
		{"catatonit", s.CatatonitPath, look("catatonit")},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if s.ContainerLogMaxSize != 1<<30 {
		t.Errorf("log size max = %d, want 1Gi", s.ContainerLogMaxSize)
	}
	if s.StreamingTLS != nil {
		t.Error("streaming TLS without certificates")
	}
	// Only the installed known handlers, each with its own root under the runtime's state.
	if len(s.Handlers) != 2 {
		t.Errorf("handlers = %v, want runc and runsc", s.Handlers)
	}
	for _, name := range []string{"runc", "runsc"} {
		h := s.Handlers[name]
		if h.Name != name || h.Path != look(name) || h.Root != "/run/nodelet/runtime/oci/"+name || len(h.Args) != 0 {
			t.Errorf("handler %s = %+v", name, h)
		}
	}
	n := cfg.Network
	if n == nil {
		t.Fatal("no pod network by default")
	}
	if n.ConfDir != "/etc/cni/net.d" || !reflect.DeepEqual(n.BinDirs, []string{"/usr/lib/cni", "/opt/cni/bin"}) ||
		n.StateDir != "/var/lib/nodelet/runtime/cni" || n.NoDefault {
		t.Errorf("network = %+v", n)
	}
}

func TestResolve(t *testing.T) {
	look := fakeMachine(t, "runc", "crun", "conmon", "my-runc")
	myRunc := look("my-runc")
	tests := []struct {
		name    string
		edit    func(*Settings)
		look    func(string) string
		check   func(t *testing.T, cfg Config)
		wantErr string
	}{
		{
			name: "handlers given replace discovery",
			edit: func(s *Settings) {
				s.Handlers = []string{"fast=" + myRunc + ",--debug,--systemd-cgroup"}
				s.DefaultHandler = "fast"
			},
			check: func(t *testing.T, cfg Config) {
				h := cfg.Engine.Handlers["fast"]
				if len(cfg.Engine.Handlers) != 1 || h.Path != myRunc || h.Root != "/s/runtime/oci/fast" ||
					!reflect.DeepEqual(h.Args, []string{"--debug", "--systemd-cgroup"}) {
					t.Errorf("handlers = %+v", cfg.Engine.Handlers)
				}
			},
		},
		{
			name: "no network",
			edit: func(s *Settings) { s.NoNetwork = true },
			check: func(t *testing.T, cfg Config) {
				if cfg.Network != nil {
					t.Errorf("network = %+v, want loopback only", cfg.Network)
				}
			},
		},
		{
			name: "no default network",
			edit: func(s *Settings) { s.NoDefaultNetwork = true },
			check: func(t *testing.T, cfg Config) {
				if !cfg.Network.NoDefault {
					t.Error("the default bridge would be written")
				}
			},
		},
		{
			name: "catatonit is optional",
			check: func(t *testing.T, cfg Config) {
				if cfg.Engine.CatatonitPath != "" {
					t.Errorf("catatonit = %q, want none", cfg.Engine.CatatonitPath)
				}
			},
		},
		{
			name:    "bad handler spec",
			edit:    func(s *Settings) { s.Handlers = []string{"runc"} },
			wantErr: `--runtime-handler "runc": want NAME=PATH[,ARG...]`,
		},
		{
			name:    "handler not installed",
			edit:    func(s *Settings) { s.Handlers = []string{"gone=/nonexistent/runc"}; s.DefaultHandler = "gone" },
			wantErr: "runtime handler gone: ",
		},
		{
			name:    "default handler not installed",
			edit:    func(s *Settings) { s.DefaultHandler = "runc" },
			look:    fakeMachine(t, "crun", "conmon"),
			wantErr: `default runtime handler "runc" is not installed or configured (apt-get install -y runc, or hack/install.sh)`,
		},
		{
			name:    "no OCI runtime installed",
			look:    fakeMachine(t, "runsc", "conmon"),
			wantErr: "no default runtime handler: neither crun nor runc is installed or configured",
		},
		{
			name: "crun is the default where installed",
			look: fakeMachine(t, "runc", "crun", "conmon"),
			check: func(t *testing.T, cfg Config) {
				if cfg.Engine.DefaultHandler != "crun" {
					t.Errorf("default handler %q, want crun", cfg.Engine.DefaultHandler)
				}
			},
		},
		{
			name: "runc where crun is not",
			look: fakeMachine(t, "runc", "conmon"),
			check: func(t *testing.T, cfg Config) {
				if cfg.Engine.DefaultHandler != "runc" {
					t.Errorf("default handler %q, want runc", cfg.Engine.DefaultHandler)
				}
			},
		},
		{
			name:    "no conmon",
			look:    fakeMachine(t, "runc"),
			wantErr: "conmon not found: apt-get install -y conmon (or hack/install.sh)",
		},
		{
			name:    "bad log size",
			edit:    func(s *Settings) { s.LogSizeMax = "lots" },
			wantErr: `--log-size-max "lots"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Defaults()
			if tc.edit != nil {
				tc.edit(&s)
			}
			l := look
			if tc.look != nil {
				l = tc.look
			}
			cfg, err := s.resolve("/r", "/s", nil, l)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, cfg)
		})
	}
}

// Defaults hands out its own slice: a flag appending to one command's CNI dirs changes no other.
func TestDefaultsAreCopies(t *testing.T) {
	a := Defaults()
	a.CNIBinDirs[0] = "/elsewhere"
	if Defaults().CNIBinDirs[0] == "/elsewhere" {
		t.Fatal("Defaults shares its CNI dirs")
	}
}

func TestLayout(t *testing.T) {
	if got := ImageDir("/var/lib/nodelet"); got != "/var/lib/nodelet/runtime/images" {
		t.Errorf("ImageDir = %q", got)
	}
	if got := HandlerRoot("/run/nodelet", "crun"); got != "/run/nodelet/runtime/oci/crun" {
		t.Errorf("HandlerRoot = %q", got)
	}
}
