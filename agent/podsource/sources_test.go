package podsource

import (
	"slices"
	"testing"

	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// New makes the sources the configuration names, and the manifest folder's RuntimeClasses only on
// a standalone agent: in a cluster the apiserver's apply.
func TestNewMakesTheConfiguredSources(t *testing.T) {
	folderAndURL := agentconfig.Default()
	folderAndURL.Kubelet.StaticPodPath, folderAndURL.Kubelet.StaticPodURL = t.TempDir(), "http://127.0.0.1:1/pods"
	for _, c := range []struct {
		name    string
		cfg     agentconfig.Config
		client  PodClient
		runners []string
		names   []string
		classes bool
	}{
		{name: "none", cfg: agentconfig.Default()},
		{name: "standalone", cfg: folderAndURL, runners: []string{"manifest dir", "manifest url"},
			names: []string{FileSource, HTTPSource}, classes: true},
		{name: "cluster", cfg: folderAndURL, client: kubefake.New(), runners: []string{"manifest dir", "manifest url", "apiserver source"},
			names: []string{FileSource, HTTPSource, ApiserverSource}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.cfg, c.client, nil)
			var runners []string
			for _, r := range s.Runners {
				runners = append(runners, r.Name)
			}
			if !slices.Equal(runners, c.runners) || !slices.Equal(s.Names, c.names) || (s.RuntimeClasses != nil) != c.classes {
				t.Errorf("runners %q, names %q, folder's RuntimeClasses %v", runners, s.Names, s.RuntimeClasses != nil)
			}
		})
	}
}
