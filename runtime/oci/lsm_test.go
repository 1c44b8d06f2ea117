package oci

import (
	"errors"
	"sync"
)

// fakeModules are security modules as a host with (or without) AppArmor and SELinux has them.
type fakeModules struct {
	appArmor bool
	selinux  bool
	// contexts are the policy's container process and file contexts; err fails their lookup.
	process, file string
	contextsErr   error
	loadErr       error

	mu       sync.Mutex
	loaded   map[string]bool
	loads    int
	policies []string
}

func (f *fakeModules) AppArmorEnabled() bool { return f.appArmor }

func (f *fakeModules) AppArmorLoaded(name string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.loaded[name], nil
}

func (f *fakeModules) LoadAppArmor(policy []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.loadErr != nil {
		return f.loadErr
	}
	if f.loaded == nil {
		f.loaded = map[string]bool{}
	}
	f.loads++
	f.policies = append(f.policies, string(policy))
	f.loaded[DefaultAppArmorProfile] = true
	return nil
}

func (f *fakeModules) SELinuxEnabled() bool { return f.selinux }

func (f *fakeModules) SELinuxContainerContexts() (string, string, error) {
	if f.contextsErr != nil {
		return "", "", f.contextsErr
	}
	return f.process, f.file, nil
}

var errFake = errors.New("fake failure")
