package podsource

import (
	"context"
	"log/slog"

	"github.com/nodelet/nodelet/agent/agentconfig"
)

// Sources are the pod sources an agent's configuration names, and the merger they feed.
type Sources struct {
	Merged *PodConfig
	// RuntimeClasses are the manifest folder's, on a standalone agent with a folder: its pods and
	// the URL's are admitted against them, and the runtime manager takes their handlers. In a
	// cluster the apiserver's RuntimeClasses apply, and this is nil.
	RuntimeClasses *RuntimeClassSet
	// Names are the sources configured, as the config.source annotation names them: nothing
	// counts as gone until each has spoken.
	Names []string
	// Runners feed Merged, each until its context ends.
	Runners []Runner
}

// Runner is one source to run, by the name its log lines carry.
type Runner struct {
	Name string
	Run  func(context.Context) error
}

// New makes the sources cfg names (staticPodPath, staticPodURL) and, when client is set, the
// apiserver's pods bound to the node; none runs until its Runner is run.
func New(cfg agentconfig.Config, client PodClient, log *slog.Logger) *Sources {
	s := &Sources{Merged: NewPodConfig(log)}
	if client == nil && cfg.Kubelet.StaticPodPath != "" {
		s.RuntimeClasses = NewRuntimeClassSet()
	}
	if cfg.Kubelet.StaticPodPath != "" {
		src := &ManifestDirSource{Path: cfg.Kubelet.StaticPodPath, NodeName: cfg.NodeName,
			Period: cfg.Kubelet.FileCheckFrequency.Duration, Set: s.Merged.Set, Log: log, RuntimeClasses: s.RuntimeClasses}
		s.add("manifest dir", FileSource, src.Run)
	}
	if cfg.Kubelet.StaticPodURL != "" {
		src := &ManifestURLSource{URL: cfg.Kubelet.StaticPodURL, Header: cfg.Kubelet.StaticPodURLHeader, NodeName: cfg.NodeName,
			Period: cfg.Kubelet.HTTPCheckFrequency.Duration, Set: s.Merged.Set, Log: log, RuntimeClasses: s.RuntimeClasses}
		s.add("manifest url", HTTPSource, src.Run)
	}
	if client != nil {
		src := &APISource{Client: client, NodeName: cfg.NodeName, Set: s.Merged.Set}
		s.add("apiserver source", ApiserverSource, src.Run)
	}
	return s
}

func (s *Sources) add(name, source string, run func(context.Context) error) {
	s.Runners = append(s.Runners, Runner{Name: name, Run: run})
	s.Names = append(s.Names, source)
}
