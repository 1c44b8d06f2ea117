package podpath

import (
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestElement(t *testing.T) {
	cases := []struct {
		name string
		in   string
		ok   bool
	}{
		{"plain", "web-0", true},
		{"uid", "8f1c2d3e-0000-4000-8000-000000000001", true},
		{"leading dots are a name", "..data", true},
		{"empty", "", false},
		{"dot", ".", false},
		{"dotdot", "..", false},
		{"climbs", "../../../decoy", false},
		{"slash", "a/b", false},
		{"absolute", "/etc", false},
		{"trailing slash", "a/", false},
		{"nul", "a\x00b", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Element("pod UID", c.in)
			if (err == nil) != c.ok {
				t.Fatalf("Element(%q) = %v, want ok %v", c.in, err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrUnsafe) {
				t.Fatalf("Element(%q) = %v, not ErrUnsafe", c.in, err)
			}
		})
	}
}

func TestBuilders(t *testing.T) {
	const root = "/var/lib/nodelet/agent"
	cases := []struct {
		name  string
		build func() (string, error)
		want  string
	}{
		{"pod dir", func() (string, error) { return PodDir(root, "u1") }, root + "/pods/u1"},
		{"pod dir climbing", func() (string, error) { return PodDir(root, "../../../decoy") }, ""},
		{"pod dir dot", func() (string, error) { return PodDir(root, ".") }, ""},
		{"volume dir", func() (string, error) { return VolumeDir(root, "u1", EmptyDirPlugin, "data") }, root + "/pods/u1/volumes/kubernetes.io~empty-dir/data"},
		{"volume dir climbing name", func() (string, error) {
			return VolumeDir(root, "u1", EmptyDirPlugin, "../../../../../../somedir")
		}, ""},
		{"volume dir bad uid", func() (string, error) { return VolumeDir(root, "a/b", EmptyDirPlugin, "data") }, ""},
		{"subpath dir", func() (string, error) { return SubPathDir(root, "u1", "data", "app", 2) }, root + "/pods/u1/volume-subpaths/data/app/2"},
		{"subpath dir bad container", func() (string, error) { return SubPathDir(root, "u1", "data", "..", 2) }, ""},
		{"subpath dir bad volume", func() (string, error) { return SubPathDir(root, "u1", "../x", "app", 2) }, ""},
		{"log dir", func() (string, error) { return LogDir("/var/log/pods", "ns", "web", "u1") }, "/var/log/pods/ns_web_u1"},
		{"log dir bad namespace", func() (string, error) { return LogDir("/var/log/pods", "..", "web", "u1") }, ""},
		{"log dir bad name", func() (string, error) { return LogDir("/var/log/pods", "ns", "a/../../b", "u1") }, ""},
		{"log dir bad uid", func() (string, error) { return LogDir("/var/log/pods", "ns", "web", types.UID("/../../etc")) }, ""},
		{"container log dir", func() (string, error) { return ContainerLogDir("/var/log/pods/ns_web_u1", "app") }, "/var/log/pods/ns_web_u1/app"},
		{"container dir", func() (string, error) { return ContainerDir(root, "u1", "app") }, root + "/pods/u1/containers/app"},
		{"container dir climbing", func() (string, error) { return ContainerDir(root, "u1", "..") }, ""},
		{"termination file", func() (string, error) { return TerminationMessageFile(root, "u1", "app", "0a1b") }, root + "/pods/u1/containers/app/0a1b"},
		{"termination file climbing", func() (string, error) { return TerminationMessageFile(root, "u1", "app", "../../etc-hosts") }, ""},
		{"etc-hosts", func() (string, error) { return EtcHostsFile(root, "u1") }, root + "/pods/u1/etc-hosts"},
		{"etc-hosts bad uid", func() (string, error) { return EtcHostsFile(root, "..") }, ""},
		{"container log dir climbing", func() (string, error) { return ContainerLogDir("/var/log/pods/ns_web_u1", "../../x") }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.build()
			if c.want == "" {
				if !errors.Is(err, ErrUnsafe) || got != "" {
					t.Fatalf("got %q, %v; want ErrUnsafe and no path", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
